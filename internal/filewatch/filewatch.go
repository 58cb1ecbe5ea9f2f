package filewatch

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// File is a settings file's parsed content. Safe for concurrent use: a
// reload swaps the whole value, so a reader sees the old or the new
// content, never a mix.
type File[T any] struct {
	path  string
	parse func([]byte) (T, error)
	mu    sync.RWMutex
	v     T
	// stat is the file's as last read, parsed or not.
	stat fileStat
}

// fileStat is what tells a changed file: its size, modification time and
// inode (a file renamed over it within the clock's resolution, of the
// same size, is still another file).
type fileStat struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func statOf(fi os.FileInfo) fileStat {
	st := fileStat{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// Load reads and parses the file at path; an error is the file's (it
// cannot be read, or parse refused it). Path "" gives the zero content,
// which never changes.
func Load[T any](path string, parse func([]byte) (T, error)) (*File[T], error) {
	f := &File[T]{path: path, parse: parse}
	if path == "" {
		return f, nil
	}
	if _, err := f.read(); err != nil {
		return nil, err
	}
	return f, nil
}

// Fixed holds v, read from no file (tests, tools).
func Fixed[T any](v T) *File[T] { return &File[T]{v: v} }

// Path is the file's path ("" for none).
func (f *File[T]) Path() string { return f.path }

// Get returns the content in use.
func (f *File[T]) Get() T {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.v
}

// Reload reads and parses the file again. On any error the content in
// use stays (the error says so). It reports whether the file had changed
// since it was last read.
func (f *File[T]) Reload() (bool, error) {
	if f.path == "" {
		return false, nil
	}
	changed, err := f.read()
	if err != nil {
		return false, fmt.Errorf("%w (the content in use stays)", err)
	}
	return changed, nil
}

// read reads and parses the file, and keeps its content when it parses;
// either way it notes the file's stat, so a bad file is not read again
// until it changes.
func (f *File[T]) read() (bool, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	st := statOf(fi)
	b, err := os.ReadFile(f.path)
	if err == nil {
		var v T
		if v, err = f.parse(b); err == nil {
			f.mu.Lock()
			defer f.mu.Unlock()
			changed := st != f.stat
			f.v, f.stat = v, st
			return changed, nil
		}
		err = fmt.Errorf("file %s: %w", f.path, err)
	}
	f.mu.Lock()
	f.stat = st
	f.mu.Unlock()
	return false, err
}

// Changed reports whether the file's size, modification time or inode differ
// from when it was last read: a stat, cheap enough to poll.
func (f *File[T]) Changed() bool {
	if f.path == "" {
		return false
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return statOf(fi) != f.stat
}

// Watch reloads the file every poll when it changed, until ctx ends,
// and hands each outcome to reloaded (nil: the new content is in use).
// Without a file or a poll interval it returns at once.
func (f *File[T]) Watch(ctx context.Context, poll time.Duration, reloaded func(error)) {
	if poll <= 0 || f.path == "" {
		return
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f.Changed() {
				continue
			}
			_, err := f.Reload()
			if reloaded != nil {
				reloaded(err)
			}
		}
	}
}
