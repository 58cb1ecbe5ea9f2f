package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out, errs bytes.Buffer
		err := run(context.Background(), []string{arg}, &out, &errs, nil)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs.String(), "-data-dir") || !strings.Contains(errs.String(), "-endpoint-url") {
			t.Errorf("%s: %v %q", arg, err, errs.String())
		}
	}
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-no-such-flag"}, &out, &errs, nil); err == nil {
		t.Error("an unknown flag was accepted")
	}
}
