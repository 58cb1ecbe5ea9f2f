// Command webpush-go is an application server's push with the
// github.com/SherClockHolmes/webpush-go library, written as its README
// writes it: SendNotification with the VAPID keys in its Options. The
// README's quickstart runs it against the development server (https with
// its development CA in SSL_CERT_FILE).
//
//	go run ./tools/examples/webpush-go VAPID.json SUBSCRIPTION.json MESSAGE
//
// VAPID.json is pushsend keys' output, SUBSCRIPTION.json a
// PushSubscription's JSON (pushsend listen -sub-file).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	webpush "github.com/SherClockHolmes/webpush-go"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: webpush-go VAPID.json SUBSCRIPTION.json MESSAGE")
		os.Exit(2)
	}
	var keys struct{ PublicKey, PrivateKey string }
	var sub webpush.Subscription
	if err := readJSON(os.Args[1], &keys); err != nil {
		fail(err)
	}
	if err := readJSON(os.Args[2], &sub); err != nil {
		fail(err)
	}
	resp, err := webpush.SendNotification([]byte(os.Args[3]), &sub, &webpush.Options{
		Subscriber:      "you@example.com",
		VAPIDPublicKey:  keys.PublicKey,
		VAPIDPrivateKey: keys.PrivateKey,
		TTL:             60,
	})
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get("Location"))
	if resp.StatusCode != 201 {
		fail(fmt.Errorf("%s", body))
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "webpush-go:", err)
	os.Exit(1)
}
