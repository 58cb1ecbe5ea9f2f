package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/internal/cli"
)

func main() {
	if cli.PrintVersion("pushclient", os.Args[1:], os.Stdout) {
		return
	}
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "pushclient:", err)
		os.Exit(2)
	}
}

const usage = `usage: pushclient -name NAME [-scopes send,read] [-rate N] [-outstanding N] [-key-stdin]

Mints a key for a client of the push API and prints it once, with the
client's entry for push-clients-file (only the key's SHA-256 is in it):

    # client "marketing": its key, shown this once (the file keeps only its SHA-256):
    #   Authorization: Bearer <key>
      marketing:
        key_sha256: ...
        ...

Append the entry under the file's "clients:" line; the servers reload the
file when it changes and on SIGHUP. Scopes: send (POST /push, DELETE of its
own pushes), read (GET of its own pushes), admin (every client's pushes,
and device tokens). -rate bounds its POSTs a second per node, -outstanding
its pushes not yet final; 0 is no limit.

With -key-stdin the key is read from the first line of standard input
instead of minted (to move a push-api-keys key into the file).

`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	name := fs.String("name", "", "the client's name: letters, digits, '.', '_' or '-' (required)")
	scopes := fs.String("scopes", "send,read", "comma-separated: send, read, admin")
	rate := fs.Float64("rate", 0, "POSTs a second the client may have accepted by each node (0: no limit)")
	outstanding := fs.Int("outstanding", 0, "the client's pushes that may be not yet final (0: no limit)")
	fromStdin := fs.Bool("key-stdin", false, "read the key from standard input instead of minting one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	key, err := readKey(*fromStdin, stdin)
	if err != nil {
		return err
	}
	var sc []string
	for s := range strings.SplitSeq(*scopes, ",") {
		sc = append(sc, strings.TrimSpace(s))
	}
	c := clients.Client{Name: *name, KeyHash: clients.Hash(key), Rate: *rate, Outstanding: *outstanding}
	for _, s := range sc {
		c.Scopes = append(c.Scopes, clients.Scope(s))
	}
	entry := clients.Entry(c)
	// The entry as the server will read it: what it refuses is refused here.
	if _, err := clients.Parse([]byte("clients:\n" + entry)); err != nil {
		return err
	}
	what := "its key, shown this once (the file keeps only its SHA-256)"
	if *fromStdin {
		what = "the key read from standard input"
	}
	_, err = fmt.Fprintf(stdout, "# client %q: %s:\n#   Authorization: Bearer %s\n%s", c.Name, what, key, entry)
	return err
}

// readKey mints a key, or reads it from the first line of r.
func readKey(fromStdin bool, r io.Reader) (string, error) {
	if !fromStdin {
		return clients.Mint()
	}
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the key: %w", err)
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return "", errors.New("no key on standard input")
	}
	return key, nil
}
