package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// RSS is the resident memory of the server's process trees.
type RSS struct {
	// PeakBytes is the largest sum seen while the calls ran; EndBytes is
	// the sum when they ended.
	PeakBytes int64 `json:"peak_bytes"`
	EndBytes  int64 `json:"end_bytes"`
	// Processes is how many processes EndBytes counts.
	Processes int `json:"processes"`
	// Err says why memory could not be measured (no /proc, no roots).
	Err string `json:"error,omitempty"`
}

// TreeRSS returns the summed resident set size of the processes roots and
// all their descendants, from /proc (Linux), and how many processes that is.
// Processes that exit while it reads are skipped.
func TreeRSS(roots []int) (int64, int, error) {
	if len(roots) == 0 {
		return 0, 0, errors.New("no process to measure")
	}
	children, err := childrenMap()
	if err != nil {
		return 0, 0, err
	}
	var total int64
	n := 0
	seen := make(map[int]bool)
	queue := append([]int(nil), roots...)
	for len(queue) > 0 && len(seen) < 1<<16 {
		pid := queue[0]
		queue = queue[1:]
		if pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		if rss, err := processRSS(pid); err == nil {
			total += rss
			n++
		}
		queue = append(queue, children[pid]...)
	}
	return total, n, nil
}

// childrenMap maps every process id to its children's, from /proc/*/stat.
func childrenMap() (map[int][]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("reading /proc: %w", err)
	}
	children := make(map[int][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited
		}
		// pid (comm) state ppid ...; comm may contain spaces and parens.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(data[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(fields[1]))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	return children, nil
}

// processRSS returns VmRSS of pid in bytes.
func processRSS(pid int) (int64, error) {
	m, err := ProcessMemory(pid)
	return m.RSS, err
}

// Memory is one process's resident memory, from /proc/PID/status.
type Memory struct {
	// RSS is the resident set now (VmRSS); Peak is the largest it has been
	// since the process started or ResetPeak (VmHWM).
	RSS, Peak int64
}

// ProcessMemory returns the resident memory of pid (Linux).
func ProcessMemory(pid int) (Memory, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	found := 0
	for line := range bytes.Lines(data) {
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &m.RSS
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &m.Peak
		default:
			continue
		}
		fields := bytes.Fields(line[len("VmXXX:"):])
		if len(fields) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("pid %d: %q: %w", pid, bytes.TrimSpace(line), err)
		}
		*dst = kb << 10
		found++
	}
	if found < 2 {
		return Memory{}, fmt.Errorf("pid %d: no VmRSS and VmHWM (a kernel thread or a zombie)", pid)
	}
	return m, nil
}

// ResetPeak resets the peak resident set (VmHWM) of pid to its current
// size, by writing 5 to /proc/PID/clear_refs (Linux 4.0 and later; the
// caller must be allowed to trace pid, as its parent running as the same
// user is).
func ResetPeak(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// rssSampler samples TreeRSS of roots until stopped.
type rssSampler struct {
	roots []int
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	peak  int64
	err   error
}

func startRSSSampler(roots []int, every time.Duration) *rssSampler {
	s := &rssSampler{roots: roots, stopc: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() (int64, int) {
	rss, n, err := TreeRSS(s.roots)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		return 0, 0
	}
	s.peak = max(s.peak, rss)
	return rss, n
}

// stop stops sampling, takes a last sample and returns the result.
func (s *rssSampler) stop() RSS {
	close(s.stopc)
	<-s.done
	end, n := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := RSS{PeakBytes: s.peak, EndBytes: end, Processes: n}
	if s.err != nil {
		r.Err = s.err.Error()
	}
	return r
}
