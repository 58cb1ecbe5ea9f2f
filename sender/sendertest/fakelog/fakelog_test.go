package fakelog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestWaitWakesOnAdd(t *testing.T) {
	var l Log[int]
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), 3, "test") }()
	for i := range 3 {
		select {
		case err := <-done:
			t.Fatalf("Wait returned after %d adds: %v", i, err)
		default:
		}
		l.Add(i)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := l.All(); len(got) != 3 || got[0] != 0 || got[2] != 2 || l.Len() != 3 {
		t.Fatalf("All %v, Len %d", got, l.Len())
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	var l Log[string]
	l.Add("one")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := l.Wait(ctx, 2, "fake: requests")
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "fake: requests: 1, waited for 2: context deadline exceeded" {
		t.Fatalf("%v", err)
	}
}

func TestInFlight(t *testing.T) {
	var l Log[int]
	var wg sync.WaitGroup
	start, release := make(chan struct{}), make(chan struct{})
	for range 5 {
		wg.Go(func() {
			leave := l.Enter()
			start <- struct{}{}
			<-release
			leave()
		})
	}
	for range 5 {
		<-start
	}
	if l.InFlight() != 5 {
		t.Fatalf("in flight %d, want 5", l.InFlight())
	}
	close(release)
	wg.Wait()
	if l.InFlight() != 0 || l.MaxInFlight() != 5 {
		t.Fatalf("in flight %d, max %d", l.InFlight(), l.MaxInFlight())
	}
}
