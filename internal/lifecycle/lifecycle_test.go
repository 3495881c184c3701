package lifecycle

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGoIsRefusedUnlessTheGroupRuns(t *testing.T) {
	g := New(nil)
	ran := false
	if g.Go(func(context.Context) { ran = true }) {
		t.Fatal("Go before Start was accepted")
	}
	if g.Defer(func() { ran = true }) {
		t.Fatal("Defer before Start was accepted")
	}
	if !g.Start(t.Context()) || g.Start(t.Context()) {
		t.Fatal("Start: want true once, then false")
	}
	g.Close()
	if g.Go(func(context.Context) { ran = true }) {
		t.Fatal("Go after Close was accepted")
	}
	if g.Defer(func() { ran = true }) {
		t.Fatal("Defer after Close was accepted")
	}
	if g.Start(t.Context()) {
		t.Fatal("Start after Close was accepted")
	}
	if ran {
		t.Fatal("a refused function ran")
	}
	if !g.Closed() || g.Running() {
		t.Fatalf("after Close: Closed %v, Running %v", g.Closed(), g.Running())
	}
}

func TestCloseCancelsAndWaitsForEveryGoroutineThenRunsDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(nil)
		g.Start(context.Background())
		var mu sync.Mutex
		var order []string
		note := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		release := make(chan struct{})
		for range 3 {
			if !g.Go(func(ctx context.Context) {
				<-ctx.Done()
				<-release // still running after the cancellation
				note("goroutine")
			}) {
				t.Fatal("Go refused while running")
			}
		}
		g.Defer(func() { note("deferred 1") })
		g.Defer(func() { note("deferred 2") })
		closed := make(chan struct{})
		go func() {
			g.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while goroutines ran")
		default:
		}
		if g.Context().Err() == nil {
			t.Fatal("the context is not cancelled once Close has begun")
		}
		close(release)
		<-closed
		want := []string{"goroutine", "goroutine", "goroutine", "deferred 2", "deferred 1"}
		if len(order) != len(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("order %v, want %v", order, want)
			}
		}
	})
}

func TestAPanicInGoIsRecoveredAndLogged(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	g := New(zap.New(core))
	g.Start(t.Context())
	g.Go(func(context.Context) { panic("boom") })
	g.Defer(func() { panic("deferred boom") })
	g.Close() // returns: the panics did not take the process down
	if n := logs.FilterMessage("panic in a goroutine").Len(); n != 2 {
		t.Fatalf("%d panics logged, want 2: %v", n, logs.All())
	}
	for _, e := range logs.All() {
		if _, ok := e.ContextMap()["stack"]; !ok {
			t.Fatalf("a panic was logged without its stack: %v", e.ContextMap())
		}
	}
}

func TestContextBeforeStartIsNeverDone(t *testing.T) {
	g := New(nil)
	if g.Context().Done() != nil {
		t.Fatal("the context before Start can be done")
	}
	g.Close() // before Start: nothing to wait for
	if !g.Closed() {
		t.Fatal("Close before Start did not close")
	}
}

func TestGoAndCloseRaceWithoutLosingAGoroutine(t *testing.T) {
	for range 50 {
		g := New(nil)
		g.Start(t.Context())
		var started, finished sync.WaitGroup
		var mu sync.Mutex
		accepted, ended := 0, 0
		for range 8 {
			started.Add(1)
			go func() {
				defer started.Done()
				ok := g.Go(func(ctx context.Context) {
					<-ctx.Done()
					mu.Lock()
					ended++
					mu.Unlock()
				})
				if ok {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}()
		}
		finished.Add(1)
		go func() {
			defer finished.Done()
			g.Close()
		}()
		started.Wait()
		finished.Wait()
		g.Close() // the goroutines accepted after the first Close began are waited for too
		mu.Lock()
		if ended != accepted {
			t.Fatalf("%d goroutines accepted, %d ended when Close returned", accepted, ended)
		}
		mu.Unlock()
	}
}
