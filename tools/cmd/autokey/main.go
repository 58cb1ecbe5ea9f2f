package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/token"
)

func main() {
	if cli.PrintVersion("autokey", os.Args[1:], os.Stdout) {
		return
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if err == flag.ErrHelp {
			return // asked for: not a failure
		}
		fmt.Fprintln(os.Stderr, "autokey:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("autokey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: autokey

Prints a new random CRYPTO_KEY (one line: a Fernet key, 32 bytes in url-safe
base64 with padding). Give the same CRYPTO_KEY to the connection and the
endpoint nodes: endpoint URLs and message ids are encrypted with it, so
changing it invalidates every existing subscription unless the old key is
kept. To rotate, list the new key first and the old after it:

    CRYPTO_KEY=NEWKEY,OLDKEY

A CRYPTO_KEY from autopush (Python) or autopush-rs works as it is, so
existing endpoints keep working after a migration. Keep it secret.
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	_, err := fmt.Fprintln(stdout, token.GenerateKey())
	return err
}
