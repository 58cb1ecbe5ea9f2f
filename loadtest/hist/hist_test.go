package hist

import (
	"math"
	"testing"
)

func TestHistogramsTravel(t *testing.T) {
	r := NewRecorder()
	r.StartStage(1000, 5000)
	for at := int64(0); at < 10000; at += 10 {
		r.Record(at, at+2_000_000) // 2 ms each
	}
	stage, interval := New(), New()
	if err := Merge(stage, r.TakeStage()); err != nil {
		t.Fatal(err)
	}
	if err := Merge(interval, r.TakeInterval()); err != nil {
		t.Fatal(err)
	}
	if stage.TotalCount() != 400 || interval.TotalCount() != 1000 {
		t.Errorf("stage %d (want 400 in the window), interval %d", stage.TotalCount(), interval.TotalCount())
	}
	if l := Summarize(stage); math.Abs(l.P99-2) > 0.01 || l.Max < 2 {
		t.Errorf("summary %+v", l)
	}
	if Merge(stage, []byte("junk")) == nil {
		t.Error("junk decoded")
	}
}
