package swrve

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/autopush-go/autopush/internal/filewatch"
)

// Keys maps (message prototype, platform) to the push_key of the Swrve
// campaign, in a YAML file of this shape:
//
//	swrve:
//	  messagePrototypePushKeys:
//	    'Hello':
//	      IOS: d36ae023-010c-4f3a-9bd7-9924a754b4b4
//	      ANDROID: f31690cb-a763-4259-af18-6aed41afd9ed
//
// (the top-level "swrve:" may be left out). Safe for concurrent use: the
// file is an internal/filewatch.File, whose reload swaps the whole map,
// so a lookup sees the old or the new mapping, never a mix.
type Keys struct {
	*filewatch.File[map[string]map[string]string]
}

type keysFile struct {
	Swrve *struct {
		Map map[string]map[string]string `yaml:"messagePrototypePushKeys"`
	} `yaml:"swrve"`
	Map map[string]map[string]string `yaml:"messagePrototypePushKeys"`
}

// ParseKeys parses the mapping file's content. A mapping left out, or
// given nothing ("messagePrototypePushKeys:" alone, "swrve:" alone), and a
// prototype given no platform, are refused: that is what a file rewritten
// in place is when read before its keys are written, and taking it would
// FAIL the queued pushes of every prototype it lacks.
// "messagePrototypePushKeys: {}" maps nothing on purpose.
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
	if m == nil {
		return nil, fmt.Errorf("swrve: keys: no messagePrototypePushKeys mapping (a file cut short while written?); " +
			"\"messagePrototypePushKeys: {}\" maps nothing on purpose")
	}
	for proto, platforms := range m {
		if len(platforms) == 0 {
			return nil, fmt.Errorf("swrve: keys: prototype %q has no platform (a file cut short while written?)", proto)
		}
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
// send then fails with MESSAGE_PROTOTYPE_KEY). Reload re-reads it (the
// mapping in use stays on any error); Changed tells a poll whether to.
func LoadKeys(path string) (*Keys, error) {
	f, err := filewatch.Load(path, ParseKeys)
	if err != nil {
		return nil, fmt.Errorf("swrve: keys: %w", err)
	}
	return &Keys{f}, nil
}

// NewKeys holds a fixed mapping (tests, tools).
func NewKeys(m map[string]map[string]string) *Keys { return &Keys{filewatch.Fixed(m)} }

// Lookup returns the push_key of prototype on platform.
func (k *Keys) Lookup(prototype, platform string) (string, bool) {
	key, ok := k.Get()[prototype][platform]
	return key, ok
}

// Len is the number of prototypes mapped.
func (k *Keys) Len() int { return len(k.Get()) }
