// Package dockerflow holds what both tiers serve on Mozilla's dockerflow
// routes (/__version__, /__heartbeat__, /__lbheartbeat__) and must agree on.
//
// It must never import a tier.
package dockerflow
