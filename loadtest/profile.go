package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// profileDuring returns what pushStage (or connectAll) runs alongside a
// phase when -profile is set: after skip, a CPU profile of secs from every
// server process (cluster.ProfileTargets), saved as
// <dir>/<phase>.<process>.pprof. nil without -profile. A profile that
// fails is logged, not fatal: the phase's figures stand without it.
func (r *run) profileDuring(phase string, skip, secs time.Duration) func(stop <-chan struct{}) {
	if r.cfg.Profile == "" {
		return nil
	}
	secs = secs.Truncate(time.Second)
	if secs < time.Second {
		r.mon.Logf("profile %s: the phase is too short for a profile of a whole second", phase)
		return nil
	}
	return func(stop <-chan struct{}) {
		select {
		case <-stop:
			return
		case <-time.After(skip):
		}
		var wg sync.WaitGroup
		for _, t := range r.cl.ProfileTargets() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := filepath.Join(r.cfg.Profile, fileSafe(phase)+"."+t.Name+".pprof")
				if err := saveProfile(t.BaseURL, secs, path); err != nil {
					r.mon.Logf("profile %s of %s: %v", phase, t.Name, err)
				}
			}()
		}
		wg.Wait()
	}
}

// withProfile runs fn, with, when -profile is set, the first
// ProfileTime of it (after a second) profiled as phase.
func (r *run) withProfile(phase string, fn func() error) error {
	during := r.profileDuring(phase, time.Second, r.cfg.ProfileTime)
	if during == nil {
		return fn()
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		during(stop)
	}()
	err := fn()
	close(stop)
	<-done
	return err
}

// saveProfile fetches base/debug/pprof/profile?seconds=N into path.
func saveProfile(base string, secs time.Duration, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), secs+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(secs.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return f.Close()
}

// fileSafe turns a phase name ("1,000/s") into a file name part.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r == '/':
			return 'p' // "1000/s" -> "1000ps"
		case r == ' ':
			return '-'
		}
		return -1
	}, s)
}
