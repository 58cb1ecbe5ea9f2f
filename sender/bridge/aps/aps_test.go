package aps

import (
	"errors"
	"strings"
	"testing"
)

// Check refuses what autopush-rs's registration or derivation would:
// a derivation field of the wrong type, and badge, sound,
// content-available, category, mutable-content or url-args of the wrong
// type (null allowed for those).
func TestCheck(t *testing.T) {
	for _, ok := range []string{`{}`, `{"mutable-content":1}`, `{"title":"t","loc_args":["a"]}`, `{"badge":4294967295,"sound":"s",` +
		`"content-available":255,"category":"c","url-args":["u"],"unknown":[1,{}]}`, `{"badge":null,"sound":null,"url-args":null}`} {
		if err := Check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, field := range map[string]string{
		`{"title":1}`: "title", `{"loc_key":null}`: "loc_key", `{"title_loc_args":"a"}`: "title_loc_args",
		`{"mutable-content":null}`: "mutable-content", `{"mutable-content":256}`: "mutable-content",
		`{"badge":-1}`: "badge", `{"badge":4294967296}`: "badge", `{"sound":1}`: "sound", `{"content-available":1.0}`: "content-available",
		`{"category":[]}`: "category", `{"url-args":[1]}`: "url-args", `[]`: "object", `"x"`: "object",
	} {
		if err := Check(bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", bad, err, field)
		}
	}
}
