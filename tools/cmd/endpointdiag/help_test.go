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
		err := run(context.Background(), []string{arg}, &out, &errs)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs.String(), "-crypto-key") || !strings.Contains(errs.String(), "endpoint URL or token, or UAID") {
			t.Errorf("%s: %v %q", arg, err, errs.String())
		}
	}
}
