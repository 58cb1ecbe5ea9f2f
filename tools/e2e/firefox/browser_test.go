//go:build linux

package firefox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

const installHint = "firefox-esr is not installed: apt-get install -y firefox-esr (as root; make e2e does it), then make e2e"

// firefoxBinary finds Debian's firefox-esr, which make e2e installs when
// it can (as root). Missing, the test fails in CI and skips elsewhere.
func firefoxBinary(t *testing.T) string {
	path, err := exec.LookPath("firefox-esr")
	e2etest.Require(t, err == nil, installHint)
	return path
}

// prefs returns the profile's user.js settings for the push server at
// serverURL (ws:// or wss://). The push ones are what Firefox needs to use
// a plain ws:// server on loopback (a wss:// one needs no testing pref) and deliver pushes without a shown notification
// (which would otherwise burn the subscription's quota); the rest keeps a
// headless run from reaching out to Mozilla's services, which CI cannot
// reach and which would only add noise and delay.
func prefs(serverURL string) map[string]any {
	return map[string]any{
		"dom.push.serverURL":                       serverURL,
		"dom.push.testing.allowInsecureServerURL":  strings.HasPrefix(serverURL, "ws:"),
		"dom.push.enabled":                         true,
		"dom.push.connection.enabled":              true,
		"dom.push.testing.ignorePermission":        true,
		"permissions.default.desktop-notification": 1,
		"dom.serviceWorkers.enabled":               true,
		"dom.serviceWorkers.testing.enabled":       true,
		"alerts.useSystemBackend":                  false,
		"dom.push.maxQuotaPerSubscription":         1000000,
		"network.manage-offline-status":            false,
		"dom.push.loglevel":                        "Debug",
		"devtools.console.stdout.chrome":           true,
		"devtools.console.stdout.content":          true,
		// Reconnect soon after the server restarts: the backoff starts
		// here and doubles (default 5 s).
		"dom.push.retryBaseInterval": 500,

		// Loopback only, never through a proxy from the environment.
		"network.proxy.type":                      0,
		"network.trr.mode":                        5, // DoH off
		"network.captive-portal-service.enabled":  false,
		"network.connectivity-service.enabled":    false,
		"network.dns.disablePrefetch":             true,
		"network.prefetch-next":                   false,
		"network.http.speculative-parallel-limit": 0,

		"app.update.auto":                                 false,
		"app.update.disabledForTesting":                   true,
		"extensions.update.enabled":                       false,
		"extensions.getAddons.cache.enabled":              false,
		"extensions.blocklist.enabled":                    false,
		"media.gmp-manager.updateEnabled":                 false,
		"browser.search.update":                           false,
		"toolkit.telemetry.enabled":                       false,
		"toolkit.telemetry.unified":                       false,
		"toolkit.telemetry.server":                        "",
		"toolkit.telemetry.archive.enabled":               false,
		"datareporting.policy.dataSubmissionEnabled":      false,
		"datareporting.healthreport.uploadEnabled":        false,
		"browser.safebrowsing.malware.enabled":            false,
		"browser.safebrowsing.phishing.enabled":           false,
		"browser.safebrowsing.downloads.enabled":          false,
		"browser.safebrowsing.blockedURIs.enabled":        false,
		"browser.safebrowsing.provider.google.updateURL":  "",
		"browser.safebrowsing.provider.google4.updateURL": "",
		"browser.safebrowsing.provider.mozilla.updateURL": "",
		"app.normandy.enabled":                            false,
		"app.normandy.api_url":                            "",
		"app.shield.optoutstudies.enabled":                false,
		// Honoured only with MOZ_REMOTE_SETTINGS_DEVTOOLS=1 in the env.
		"services.settings.server": "http://127.0.0.1:9/",

		"browser.shell.checkDefaultBrowser":                 false,
		"browser.startup.homepage_override.mstone":          "ignore",
		"startup.homepage_welcome_url":                      "",
		"startup.homepage_override_url":                     "",
		"browser.aboutwelcome.enabled":                      false,
		"datareporting.policy.firstRunURL":                  "",
		"trailhead.firstrun.didSeeAboutWelcome":             true,
		"browser.newtabpage.enabled":                        false,
		"browser.startup.page":                              0,
		"browser.tabs.warnOnClose":                          false,
		"browser.sessionstore.resume_from_crash":            false,
		"toolkit.startup.max_resumed_crashes":               -1,
		"browser.topsites.contile.enabled":                  false,
		"browser.newtabpage.activity-stream.feeds.topsites": false,
		"geo.provider.network.url":                          "",
		"browser.region.network.url":                        "",
	}
}

// writeProfile makes a fresh profile directory with user.js for the
// push server at serverURL.
func writeProfile(t *testing.T, dir, serverURL string) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := prefs(serverURL)
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		v := p[k]
		if s, ok := v.(string); ok {
			v = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, "user_pref(%q, %v);\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(dir, "user.js"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// browser is a running Firefox. It spawns child processes (content,
// socket, GPU), so it runs in its own process group and is stopped by
// that group's id.
type browser struct {
	p   *proc.Proc
	log string
}

// launch starts Firefox headless on profile, opening url, with stdout
// and stderr (the push trace) in logPath.
func launch(t *testing.T, bin, profile, url, logPath string) *browser {
	cmd := exec.Command(bin, "--headless", "--no-remote", "--new-instance", "--profile", profile, url)
	cmd.Env = append(os.Environ(),
		"MOZ_REMOTE_SETTINGS_DEVTOOLS=1", // lets the profile turn remote settings off
		"MOZ_CRASHREPORTER_DISABLE=1",
		"HOME="+filepath.Dir(profile), // nothing from the user's own ~/.mozilla
	)
	// proc's Pdeathsig: should the test binary die without its cleanups
	// (a timeout, or ^C, which the new group does not get), Firefox goes
	// too.
	p, err := proc.Start(context.Background(), cmd, proc.Config{Name: "firefox", LogPath: logPath, Group: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{p: p, log: logPath}
	t.Cleanup(b.stop)
	return b
}

// stop ends the whole process group: SIGTERM, then SIGKILL after a grace
// period, and SIGKILL again for any child left once the leader is gone.
func (b *browser) stop() { b.p.Stop(5 * time.Second) }

// helloUAID finds the uaid in a hello as the push trace quotes it.
var helloUAID = regexp.MustCompile(`\\"uaid\\":\\"([0-9a-fA-F-]*)\\"`)

// hellos reads Firefox's push trace (dom.push.loglevel Debug): the uaid
// each hello it sent carried ("" for none) and the uaid of each hello
// reply it received.
func (b *browser) hellos() (sent, got []string) {
	for _, l := range b.logLines(`\"messageType\":\"hello\"`) {
		u := ""
		if m := helloUAID.FindStringSubmatch(l); m != nil {
			u = m[1]
		}
		switch {
		case strings.Contains(l, "wsSendMessage"):
			sent = append(sent, u)
		case strings.Contains(l, "wsOnMessageAvailable"):
			got = append(got, u)
		}
	}
	return sent, got
}

// logLines returns the lines of Firefox's output containing substr.
func (b *browser) logLines(substr string) []string {
	f, err := os.Open(b.log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}
