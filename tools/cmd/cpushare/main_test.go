package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// stack makes a sample of v nanoseconds whose frames are fns, leaf first.
func stack(v int64, fns ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, v}}
	for _, fn := range fns {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: fn}}}})
	}
	return s
}

func cpuProfile(samples ...*profile.Sample) *profile.Profile {
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample:     samples,
	}
}

// The leaf-most frame with a kind decides: an allocation inside the JSON
// encoder is allocation, a write under Hertz is the kernel's, a verify
// called from the service is ECDSA's.
func TestShareByLeafMostKind(t *testing.T) {
	p := cpuProfile(
		stack(30, "runtime.mallocgc", "encoding/json.Marshal", "github.com/autopush-go/autopush/apitier.(*Server).push"),
		stack(20, "internal/runtime/syscall/linux.Syscall6", "syscall.write", "github.com/cloudwego/hertz/pkg/network.Write"),
		stack(40, "crypto/internal/fips140/nistec.p256PointDoubleAsm", "crypto/ecdsa.VerifyASN1", "github.com/autopush-go/autopush/internal/vapid.Verify"),
		stack(10, "github.com/autopush-go/autopush/engine.(*Server).deliver"),
		stack(5, "runtime.memequal"),
	)
	c, err := share(p, "x")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"allocation and collection":         30,
		"kernel calls (read, write, epoll)": 20,
		"ECDSA P-256 (VAPID)":               40,
		"service code (autopush)":           10,
		other:                               5,
	}
	if c.total != 105 {
		t.Errorf("total %d, want 105", c.total)
	}
	for k, v := range want {
		if c.by[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, c.by[k], v, c.by)
		}
	}
	var b bytes.Buffer
	write(&b, []column{c}, 10)
	if out := b.String(); !strings.Contains(out, "| ECDSA P-256 (VAPID) | 38.1% (0.0 µs) |") || !strings.Contains(out, "| total | 100.0% (0.0 µs) |") {
		t.Errorf("table:\n%s", out)
	}
}

func TestNotACPUProfile(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}}
	if _, err := share(p, "heap"); err == nil {
		t.Error("a heap profile was taken for a CPU profile")
	}
}
