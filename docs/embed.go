package docs

import _ "embed"

// MetricsMarkdown is metrics.md. Its tables' descriptions are the # HELP
// text every node serves on /metrics (internal/exposition), so a metric
// is described in one place, the one its readers look at.
//
//go:embed metrics.md
var MetricsMarkdown string
