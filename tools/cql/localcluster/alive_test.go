package localcluster_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// syscallAlive is nil while pid runs (a zombie does not: the nodes' parent
// is whatever reaps orphans here, maybe late).
func syscallAlive(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	if strings.Contains(string(b), "State:\tZ") {
		return errors.New("zombie")
	}
	return nil
}
