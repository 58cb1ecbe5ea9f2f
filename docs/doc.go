// Package docs is the operator and developer documentation (Markdown and
// OpenAPI files). Its one piece of code embeds metrics.md, whose
// descriptions the nodes serve as # HELP on /metrics. Its tests check the
// documents against the code: the OpenAPI files are valid and list
// exactly the routes the servers register, real answers match them, and
// the errno table, the configuration reference and the metrics list are
// the code's.
//
// The generated sections are refreshed with
//
//	go test ./docs -run TestGenerated -update
package docs
