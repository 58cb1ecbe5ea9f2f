// Package docs is the operator and developer documentation (Markdown and
// OpenAPI files). It has no code; its tests check the documents against
// the code: the OpenAPI files are valid and list exactly the routes the
// servers register, real answers match them, and the errno table, the
// configuration reference and the metrics list are the code's.
//
// The generated sections are refreshed with
//
//	go test ./docs -run TestGenerated -update
package docs
