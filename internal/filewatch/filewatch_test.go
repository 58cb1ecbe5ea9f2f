package filewatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parseInt(b []byte) (int, error) { return strconv.Atoi(strings.TrimSpace(string(b))) }

// replace writes content beside path and renames it over path, as a
// deployment tool does: a poll never reads half a file.
func replace(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	replace(t, path, "not a number")
	if _, err := Load(path, parseInt); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load of a bad file: %v, want an error naming the file", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), parseInt); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
	f, err := Load("", parseInt)
	if err != nil || f.Get() != 0 || f.Changed() {
		t.Fatalf("no file: %v %d", err, f.Get())
	}
}

// Watch reloads a changed file; a bad one is reported once (not at every
// poll) and the content in use stays until a good one comes.
func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	replace(t, path, "1")
	f, err := Load(path, parseInt)
	if err != nil || f.Get() != 1 {
		t.Fatalf("Load: %v %d", err, f.Get())
	}
	outcomes := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.Watch(ctx, time.Millisecond, func(err error) { outcomes <- err })
		close(done)
	}()
	defer func() { cancel(); <-done }()

	replace(t, path, "22")
	if err := <-outcomes; err != nil || f.Get() != 22 {
		t.Fatalf("after a change: %v %d, want 22", err, f.Get())
	}
	replace(t, path, "bad")
	if err := <-outcomes; err == nil || !strings.Contains(err.Error(), "content in use stays") {
		t.Fatalf("bad file: %v", err)
	}
	if f.Get() != 22 {
		t.Fatalf("a bad file replaced the content: %d", f.Get())
	}
	replace(t, path, "333")
	// The next outcome is the good file's: the bad one was reported once.
	if err := <-outcomes; err != nil || f.Get() != 333 {
		t.Fatalf("after the fix: %v %d, want 333", err, f.Get())
	}
}
