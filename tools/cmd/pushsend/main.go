package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/autopush-go/autopush/internal/cli"
	"github.com/autopush-go/autopush/internal/pushcrypto"
)

func main() {
	if cli.PrintVersion("pushsend", os.Args[1:], os.Stdout) {
		return
	}
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "pushsend:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "pushsend:", err)
		os.Exit(1)
	}
}

// errUsage marks errors in the command line (exit status 2).
var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// parseFlags parses a command's flags, which take no other argument.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

const usage = `usage: pushsend <command> [flags]

An application server for smoke tests: makes VAPID keys, encrypts a message
for a subscription (RFC 8291), signs it (RFC 8292 VAPID), sends it to the
push endpoint and prints the push service's answer.

Commands:
  keys    print a new VAPID key pair as JSON {"publicKey", "privateKey"}
          (base64url; the public key is a subscription's applicationServerKey)
  send    send one push to a subscription and print the response
  smoke   end-to-end check of a deployment: connect to the websocket as a
          user agent, subscribe, push to the endpoint it gets, receive and
          decrypt the message, ack it, unsubscribe
  listen  a test user agent: subscribe, print the subscription's JSON for
          an application server, then each message decrypted; keeps its
          identity in a state file, so it comes back to stored messages

"pushsend <command> -h" lists the command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageErr("a command is required")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	case "keys":
		return runKeys(args[1:], stdout, stderr)
	case "send":
		return runSend(ctx, args[1:], stdout, stderr)
	case "smoke":
		return runSmoke(ctx, args[1:], stdout, stderr)
	case "listen":
		return runListen(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return usageErr("unknown command %q", args[0])
}

func runKeys(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushsend keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: pushsend keys

Prints a new VAPID key pair (P-256) as JSON, in the form the web-push
libraries use: "publicKey" is the uncompressed point and "privateKey" the
private scalar, both base64url without padding. Give the public key to
browsers as applicationServerKey (it makes a v2 endpoint bound to it) and
the private key to "pushsend send -vapid-private". Keep the private key
secret.
`)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := pushcrypto.NewVAPIDSigner("")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]string{"publicKey": s.Public, "privateKey": s.Private()})
}
