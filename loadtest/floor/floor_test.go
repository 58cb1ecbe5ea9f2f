package floor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if IsServer() {
		if err := Serve(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestFloorSmall runs every variant for a second at 200 pushes/s: each
// push is answered, each frame reaches its user agent, and the synced
// variant wrote one record per push.
func TestFloorSmall(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Rates: []int{200}, Stage: time.Second, UAs: 20, Conns: 4, Variants: Variants, Dir: dir}
	rep, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != len(Variants) {
		t.Fatalf("%d stages, want %d", len(rep.Stages), len(Variants))
	}
	for _, st := range rep.Stages {
		if st.Failed != 0 || st.Pushes < 150 || st.CPUPerPush <= 0 {
			t.Errorf("%s: %d delivered, %d failed, %.1f µs per push; want at least 150, none failed, some CPU", st.Variant, st.Pushes, st.Failed, st.CPUPerPush)
		}
		if st.Variant == "synced" {
			fi, err := os.Stat(filepath.Join(dir, "records"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != st.Pushes*recordSize {
				t.Errorf("synced: %d bytes written for %d pushes, want %d each", fi.Size(), st.Pushes, recordSize)
			}
		}
	}
}

func TestUnknownVariant(t *testing.T) {
	cfg := Config{Rates: []int{10}, Stage: time.Second, UAs: 1, Conns: 1, Variants: []string{"tcp"}, Dir: t.TempDir()}
	if _, err := Run(context.Background(), cfg, io.Discard); err == nil {
		t.Fatal("an unknown variant ran")
	}
}

func TestParseFlags(t *testing.T) {
	cfg, out, err := ParseFlags([]string{"-rates", "100, 300", "-uas", "5", "-out", "x"}, io.Discard)
	if err != nil || len(cfg.Rates) != 2 || cfg.Rates[1] != 300 || cfg.UAs != 5 || out != "x" {
		t.Fatalf("got %+v %q %v", cfg, out, err)
	}
	for _, bad := range [][]string{{"-rates", "0"}, {"-rates", "x"}, {"-uas", "0"}} {
		if _, _, err := ParseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
