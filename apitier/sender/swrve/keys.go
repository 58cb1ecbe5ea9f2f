package swrve

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Keys maps (message prototype, platform) to the push_key of the Swrve
// campaign, as the seed's properties file does:
//
//	swrve:
//	  messagePrototypePushKeys:
//	    'Hello':
//	      IOS: d36ae023-010c-4f3a-9bd7-9924a754b4b4
//	      ANDROID: f31690cb-a763-4259-af18-6aed41afd9ed
//
// (the top-level "swrve:" may be left out). Safe for concurrent use: a
// reload swaps the whole map, so a lookup sees the old or the new mapping,
// never a mix.
type Keys struct {
	path string
	mu   sync.RWMutex
	m    map[string]map[string]string
	// stat is the file's as last read, loaded or not: a bad file is
	// read again when it changes (or on SIGHUP), not at every poll.
	stat fileStat
}

type fileStat struct {
	size  int64
	mtime time.Time
}

type keysFile struct {
	Swrve *struct {
		Map map[string]map[string]string `yaml:"messagePrototypePushKeys"`
	} `yaml:"swrve"`
	Map map[string]map[string]string `yaml:"messagePrototypePushKeys"`
}

// ParseKeys parses the mapping file's content.
func ParseKeys(b []byte) (map[string]map[string]string, error) {
	var f keysFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("swrve: keys: %w", err)
	}
	m := f.Map
	if f.Swrve != nil {
		m = f.Swrve.Map
	}
	for proto, platforms := range m {
		for platform, key := range platforms {
			if platform != "IOS" && platform != "ANDROID" {
				return nil, fmt.Errorf("swrve: keys: prototype %q: platform %q is not IOS or ANDROID", proto, platform)
			}
			if key == "" {
				return nil, fmt.Errorf("swrve: keys: prototype %q: empty push_key for %s", proto, platform)
			}
		}
	}
	return m, nil
}

// LoadKeys reads the mapping from path ("" gives an empty mapping: every
// send then fails with MESSAGE_PROTOTYPE_KEY).
func LoadKeys(path string) (*Keys, error) {
	k := &Keys{path: path}
	if path == "" {
		return k, nil
	}
	if _, err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// NewKeys holds a fixed mapping (tests, tools).
func NewKeys(m map[string]map[string]string) *Keys { return &Keys{m: m} }

// Lookup returns the push_key of prototype on platform.
func (k *Keys) Lookup(prototype, platform string) (string, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.m[prototype][platform]
	return key, ok
}

// Len is the number of prototypes mapped.
func (k *Keys) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.m)
}

// Reload re-reads the file. On any error the mapping in use is kept. It
// reports whether the file had changed since it was last read.
func (k *Keys) Reload() (bool, error) {
	if k.path == "" {
		return false, nil
	}
	fi, err := os.Stat(k.path)
	if err != nil {
		return false, fmt.Errorf("swrve: keys: %w", err)
	}
	st := fileStat{fi.Size(), fi.ModTime()}
	b, err := os.ReadFile(k.path)
	if err == nil {
		var m map[string]map[string]string
		if m, err = ParseKeys(b); err == nil {
			k.mu.Lock()
			defer k.mu.Unlock()
			changed := st != k.stat
			k.m, k.stat = m, st
			return changed, nil
		}
		err = fmt.Errorf("%w (file %s; the previous mapping stays in use)", err, k.path)
	} else {
		err = fmt.Errorf("swrve: keys: %w", err)
	}
	k.mu.Lock()
	k.stat = st
	k.mu.Unlock()
	return false, err
}

// Changed reports whether the file's size or modification time differ
// from when it was last read (a cheap stat, for polling).
func (k *Keys) Changed() bool {
	if k.path == "" {
		return false
	}
	fi, err := os.Stat(k.path)
	if err != nil {
		return false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return fileStat{fi.Size(), fi.ModTime()} != k.stat
}
