// Package ops holds the deployment files: Prometheus's configuration and
// Grafana's provisioning and dashboard for the compose stack
// (docker-compose.yml at the repository root, images from
// docker/Dockerfile). It has no code; its tests check those files against
// the code: the compose file yields valid configurations for both tiers,
// the images build what exists, and every metric the dashboard queries is
// served by running nodes.
package ops
