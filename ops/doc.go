// Package ops holds the deployment files: Prometheus's configuration and
// Grafana's provisioning and dashboard for the compose stack
// (docker-compose.yml at the repository root, images from
// docker/Dockerfile); the systemd unit and env file of the single-node
// server (systemd/), and the nginx site that terminates TLS in front of
// it (nginx/, run by make e2e with a real Firefox). It has no code; its tests check those files against
// the code: the compose file yields valid configurations for both tiers,
// the images build what exists, and every metric the dashboard queries is
// served by running nodes. With AUTOPUSH_PODMAN=1 (make test) the compose
// stack runs for real under podman (docker/podman/stack.sh).
package ops
