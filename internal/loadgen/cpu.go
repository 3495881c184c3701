package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// CPU is the processor time the target's own server processes spent
// during the call phase: the process each session talks to (the one
// TargetPIDs names first, or each stdio session's process), without its
// children, so that a gateway's figure leaves its upstreams out.
type CPU struct {
	// Total is the user plus system time over the call phase.
	Total time.Duration `json:"-"`
	// PerCall is Total divided by the completed calls, in microseconds.
	PerCallMicros float64 `json:"per_call_us"`
	// Err says why it could not be measured.
	Err string `json:"error,omitempty"`
}

// clockTick is the unit of the times in /proc/PID/stat (USER_HZ), 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the user plus system time pid itself has used, from
// /proc/PID/stat (Linux), children not included.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	d, err := statCPU(data)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return d, nil
}

// statCPU reads utime plus stime from the text of /proc/PID/stat:
// "pid (comm) state ppid ..." where they are fields 14 and 15, and comm
// may hold spaces and parens.
func statCPU(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", data)
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("malformed stat %q", data)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("malformed stat %q", data)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// cpuOf sums ProcessCPU over pids.
func cpuOf(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := ProcessCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// measureCPU returns the CPU pids use while f runs, per completed call.
func measureCPU(pids []int, f func() (completed int)) CPU {
	if len(pids) == 0 {
		f()
		return CPU{Err: "no process to measure"}
	}
	before, err := cpuOf(pids)
	n := f()
	if err != nil {
		return CPU{Err: err.Error()}
	}
	after, err := cpuOf(pids)
	if err != nil {
		return CPU{Err: err.Error()}
	}
	c := CPU{Total: after - before}
	if n > 0 {
		c.PerCallMicros = float64(c.Total) / float64(time.Microsecond) / float64(n)
	}
	return c
}
