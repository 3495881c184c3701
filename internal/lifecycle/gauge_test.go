package lifecycle

import (
	"sync"
	"testing"
	"testing/synctest"
)

func TestGaugeZeroIsClosedAtOnceWhenIdle(t *testing.T) {
	var c Gauge
	select {
	case <-c.Zero():
	default:
		t.Fatal("Zero of an idle gauge is not closed")
	}
}

func TestGaugeZeroIsClosedByTheLastDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Gauge
		c.Add()
		c.Add()
		z := c.Zero()
		c.Done()
		synctest.Wait()
		select {
		case <-z:
			t.Fatal("Zero closed with work in progress")
		default:
		}
		c.Done()
		select {
		case <-z: // closed by that Done itself, before any time passed
		default:
			t.Fatal("Zero not closed by the last Done")
		}
		if c.Load() != 0 {
			t.Fatalf("Load %d, want 0", c.Load())
		}
	})
}

func TestGaugeConcurrentAddDoneAndZeroNeverMissTheEnd(t *testing.T) {
	for range 200 {
		var c Gauge
		var wg sync.WaitGroup
		for range 4 {
			c.Add()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					c.Add()
					c.Done()
				}
				c.Done()
			}()
		}
		z := c.Zero()
		wg.Wait()
		<-z // a missed signal hangs here, and the test times out
	}
}

func BenchmarkGaugeAddDone(b *testing.B) {
	var c Gauge
	for b.Loop() {
		c.Add()
		c.Done()
	}
}
