package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/open"
	"github.com/google/uuid"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "endpointdiag:", err)
			os.Exit(1)
		}
	}
}

// Report is what the tool prints (as JSON with -json).
type Report struct {
	Version    string          `json:"version"`
	UAID       string          `json:"uaid"`
	CHID       string          `json:"channel_id"`
	KeyHash    string          `json:"vapid_key_sha256,omitempty"`
	User       *storage.User   `json:"router_record,omitempty"`
	UserError  string          `json:"router_error,omitempty"`
	Registered bool            `json:"channel_registered"`
	Channels   int             `json:"channels"`
	Topic      []storedMessage `json:"topic_messages"`
	Pending    []storedMessage `json:"pending_messages"`
}

type storedMessage struct {
	Version string    `json:"version"`
	Topic   string    `json:"topic,omitempty"`
	Channel string    `json:"channel_id"`
	Bytes   int       `json:"data_bytes"`
	Expires time.Time `json:"expires"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("endpointdiag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("crypto-key", os.Getenv("CRYPTO_KEY"), "Fernet key list (env CRYPTO_KEY)")
	backend := fs.String("storage", "embedded", "storage backend: embedded or scylla")
	dataDir := fs.String("data-dir", "./data", "embedded storage directory (stop the node first: Pebble locks it)")
	hosts := fs.String("cql-hosts", "127.0.0.1:9042", "ScyllaDB contact points")
	keyspace := fs.String("cql-keyspace", "autopush", "ScyllaDB keyspace")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 20, "pending messages to list")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: endpointdiag [flags] <endpoint URL or token>\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one endpoint URL or token is required")
	}
	keys, err := token.ParseKeys(*key)
	if err != nil {
		return fmt.Errorf("crypto-key: %w", err)
	}
	version, token := splitEndpoint(fs.Arg(0))
	ep, err := keys.ParseToken(version, token)
	if err != nil {
		return err
	}
	rep := Report{Version: fmt.Sprintf("v%d", ep.Version), UAID: protocol.FormatUAID(ep.UAID), CHID: uuid.UUID(ep.CHID).String()}
	if len(ep.KeyHash) > 0 {
		rep.KeyHash = hex.EncodeToString(ep.KeyHash)
	}
	store, err := open.Store(ctx, storage.Settings{Storage: *backend, DataDir: *dataDir, CQLHosts: strings.Split(*hosts, ","),
		CQLKeyspace: *keyspace, CQLConsistency: "LOCAL_QUORUM"}, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := inspect(ctx, store, ep, *limit, &rep); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(stdout, &rep)
	return nil
}

// splitEndpoint accepts a full endpoint URL (…/wpush/v2/TOKEN) or a bare
// token (taken as v1 unless prefixed "v2/").
func splitEndpoint(s string) (version, token string) {
	if i := strings.Index(s, "/wpush/"); i >= 0 {
		s = s[i+len("/wpush/"):]
	}
	if v, t, ok := strings.Cut(s, "/"); ok {
		return v, t
	}
	return "", s
}

func inspect(ctx context.Context, store storage.Store, ep token.Endpoint, limit int, rep *Report) error {
	u, err := store.GetUser(ctx, ep.UAID)
	switch {
	case err == nil:
		rep.User = &u
	case errors.Is(err, storage.ErrNotFound):
		rep.UserError = "no router record: the user agent expired or was dropped (application servers get 410)"
	default:
		return err
	}
	if rep.Registered, err = store.HasChannel(ctx, ep.UAID, ep.CHID); err != nil {
		return err
	}
	chans, err := store.Channels(ctx, ep.UAID)
	if err != nil {
		return err
	}
	rep.Channels = len(chans)
	topics, err := store.TopicMessages(ctx, ep.UAID, storage.MaxFetchLimit)
	if err != nil {
		return err
	}
	rep.Topic = summarize(topics, limit)
	var cursor uint64
	if rep.User != nil {
		cursor = rep.User.Cursor
	}
	pending, err := store.TimestampMessages(ctx, ep.UAID, cursor, max(limit, 1))
	if err != nil {
		return err
	}
	rep.Pending = summarize(pending, limit)
	return nil
}

func summarize(ms []storage.Message, limit int) []storedMessage {
	out := []storedMessage{}
	for i := range ms {
		if len(out) == limit {
			break
		}
		out = append(out, storedMessage{Version: ms[i].Version, Topic: ms[i].Topic, Channel: ms[i].CHID.String(),
			Bytes: len(ms[i].Data), Expires: ms[i].Expiry().UTC()})
	}
	return out
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "endpoint %s  uaid %s  channel %s\n", r.Version, r.UAID, r.CHID)
	if r.KeyHash != "" {
		fmt.Fprintf(w, "VAPID key sha256 %s (pushes must be signed with this key)\n", r.KeyHash)
	}
	if r.User == nil {
		fmt.Fprintln(w, "router:", r.UserError)
	} else {
		node := r.User.NodeID
		if node == "" {
			node = "(not connected: pushes are stored)"
		}
		fmt.Fprintf(w, "router: type %s, node %s, connected_at %s, last_connect %s, cursor %d\n",
			r.User.RouterType, node, time.UnixMilli(r.User.ConnectedAt).UTC().Format(time.RFC3339),
			time.UnixMilli(r.User.LastConnect).UTC().Format(time.RFC3339), r.User.Cursor)
	}
	fmt.Fprintf(w, "channel registered: %v (user has %d channels)\n", r.Registered, r.Channels)
	fmt.Fprintf(w, "stored: %d topic, %d pending after the cursor (listed up to the limit)\n", len(r.Topic), len(r.Pending))
	for _, m := range append(r.Topic, r.Pending...) {
		fmt.Fprintf(w, "  %s channel %s topic %q %d bytes, expires %s\n", m.Version, m.Channel, m.Topic, m.Bytes, m.Expires.Format(time.RFC3339))
	}
}
