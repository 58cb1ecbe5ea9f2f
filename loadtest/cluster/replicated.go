package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// startCQL starts the run's own Cassandra cluster (Config.CQLNodes nodes
// on 127.0.0.1..n, tools/cql/localcluster) and points the run at it:
// the keyspace is replicated on every node.
func (c *Cluster) startCQL(ctx context.Context) error {
	n := c.cfg.CQLNodes
	fmt.Fprintf(c.log, "loadtest: starting a %d-node Cassandra cluster (tools/cql/cluster.sh)\n", n)
	lc, err := localcluster.Start(ctx, localcluster.Options{Nodes: n, Log: prefixed{c.log}})
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	c.CQL = lc
	c.cfg.CQLHosts = lc.Hosts
	c.cfg.CQLReplication = localcluster.Replication(n)
	return nil
}

// prefixed passes the cluster scripts' progress on, line by line.
type prefixed struct {
	w interface{ Write([]byte) (int, error) }
}

func (p prefixed) Write(b []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(p.w, "loadtest: %s\n", line)
	}
	return len(b), nil
}

// balancerConf is nginx in front of the endpoints, as an operator would
// put it (ops/nginx/autopush.conf is the single-node recipe): a request
// that fails to connect goes to the next endpoint (nothing was sent);
// one that loses its endpoint mid-way (killed) is answered 503 errno 201
// with Retry-After, which is what the push API itself answers when it
// cannot store, so an application server retries it later.
const balancerConf = `daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    upstream autopush_api {
%[3]s        keepalive 64;
    }
    server {
        listen %[2]s;
        client_max_body_size 64k;
        location / {
            proxy_pass http://autopush_api;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_connect_timeout 2s;
            proxy_read_timeout 30s;
            proxy_send_timeout 30s;
            proxy_next_upstream error timeout;
            proxy_intercept_errors on;
            error_page 502 504 = @unavailable;
        }
        location @unavailable {
            default_type application/json;
            add_header Retry-After 30 always;
            return 503 '{"code":503,"errno":201,"error":"Service Unavailable","message":"The push service is unavailable: retry later"}';
        }
    }
}
`

// startBalancer runs nginx (Debian's) on addr in front of the endpoints.
func (c *Cluster) startBalancer(ctx context.Context, addr string) error {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			return fmt.Errorf("loadtest: several endpoints need nginx in front: apt-get install nginx")
		}
	}
	dir := filepath.Join(c.dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	// Workers may run as another user (nginx started by root).
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	var servers strings.Builder
	for _, a := range c.EndpointAddrs {
		// max_fails 1, fail_timeout 2s: a dead endpoint is skipped for 2 s
		// after a failed connect, then tried again.
		fmt.Fprintf(&servers, "        server %s max_fails=1 fail_timeout=2s;\n", a)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(balancerConf, dir, addr, servers.String())), 0o644); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if out, err := exec.CommandContext(ctx, bin, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		return fmt.Errorf("loadtest: nginx -t: %v\n%s", err, out)
	}
	p, err := proc.Start(ctx, exec.Command(bin, "-p", dir, "-c", conf), proc.Config{Name: "nginx",
		LogPath: filepath.Join(c.logDir, "nginx.log"), Group: true})
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	c.Balancer = p
	if err := waitListening(ctx, addr, p); err != nil {
		return err
	}
	c.EndpointURL = "http://" + addr
	fmt.Fprintf(c.log, "loadtest: nginx on %s in front of %s\n", addr, strings.Join(c.EndpointAddrs, ", "))
	return nil
}

// waitListening waits until addr accepts connections (or p exits).
func waitListening(ctx context.Context, addr string, p *proc.Proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("loadtest: nginx exited: %s", p.Tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadtest: nginx not listening on %s after 30 s", addr)
		}
	}
}

// Engine is engine i as it runs now (a fault may have restarted it).
func (c *Cluster) Engine(i int) *proc.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Engines[i]
}

// EndpointNow is the (first) endpoint as it runs now, nil when none.
func (c *Cluster) EndpointNow() *proc.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Endpoint
}

// EndpointProc is endpoint i as it runs now.
func (c *Cluster) EndpointProc(i int) *proc.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Endpoints[i]
}

// RestartEngine starts engine i again, on the addresses it had (the user
// agents and the router records name them), after it exited.
func (c *Cluster) RestartEngine(ctx context.Context, i int) error {
	old := c.Engine(i)
	<-old.Exited()
	name := fmt.Sprintf("autoconnect-%d", i)
	env := c.engineEnv(i, c.WSAddrs[i], strings.TrimSuffix(strings.TrimPrefix(c.MetricsURLs[i], "http://"), "/metrics"))
	p, err := startChild(ctx, name, filepath.Join(c.binDir, "autoconnect"), nil, env, c.logPath(name), "autoconnect started", nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Engines[i] = p
	c.mu.Unlock()
	return nil
}

// RestartEndpoint starts endpoint i again on its address, after it exited.
func (c *Cluster) RestartEndpoint(ctx context.Context, i int) error {
	old := c.EndpointProc(i)
	<-old.Exited()
	name := fmt.Sprintf("autoendpoint-%d", i)
	url := c.EndpointURL
	p, err := c.startEndpoint(ctx, name, c.EndpointAddrs[i], url)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Endpoints[i] = p
	if i == 0 {
		c.Endpoint = p
		c.APIMetricsURL = "http://" + p.Field("metrics") + "/metrics"
	}
	c.mu.Unlock()
	return nil
}
