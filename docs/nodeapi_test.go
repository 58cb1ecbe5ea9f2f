package docs_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/nodeapi"
)

// TestNodeAPIDocumentsTheContract: docs/nodeapi.yaml documents each of
// internal/nodeapi's routes with exactly the statuses the package says the
// route answers.
func TestNodeAPIDocumentsTheContract(t *testing.T) {
	doc := loadOpenAPI(t, "nodeapi.yaml")
	for route, want := range nodeapi.Answers {
		method, path, _ := strings.Cut(route, " ")
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("nodeapi.yaml does not document %s", route)
			continue
		}
		var got []int
		for code := range item.GetOperation(method).Responses.Map() {
			n, err := strconv.Atoi(code)
			if err != nil {
				t.Errorf("%s: response %q is not a status", route, code)
				continue
			}
			got = append(got, n)
		}
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: nodeapi.yaml documents %v, nodeapi answers %v", route, got, want)
		}
	}
}
