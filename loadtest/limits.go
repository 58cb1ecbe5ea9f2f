package loadtest

import (
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// Files a process opens besides its connections: an engine keeps its fd
// limit less 256 for them (engine/rlimit.go), a worker checks for 128
// (worker.fdRoom).
const (
	engineOwnFiles = 256
	workerOwnFiles = 128
)

// checkKernel refuses a run this machine's kernel settings cannot hold,
// naming each sysctl and how to raise it (read: the /proc reader; nil
// reads /proc). It changes nothing.
func checkKernel(cfg *scenario.Config, read probe.ReadFunc) error {
	l, err := probe.ReadLimits(read)
	if err != nil {
		return err
	}
	return l.Check(kernelNeeds(cfg))
}

// kernelNeeds is what cfg's run opens at once. At most cfg.PerSource()
// user agents share a source and an engine, each on its own ephemeral
// port.
func kernelNeeds(cfg *scenario.Config) probe.Needs {
	e, w := int64(cfg.EngineCount()), int64(cfg.WorkerCount())
	uas := int64(cfg.UAs)
	var posts int64 // each worker's application server's connections
	if cfg.Sends() {
		posts = int64(cfg.AppServerConns)
	}
	perEngine := ceilDiv(uas, e) + engineOwnFiles
	perWorker := ceilDiv(uas, w) + posts + workerOwnFiles
	return probe.Needs{
		Files:       2*(uas+w*posts) + e*engineOwnFiles + w*workerOwnFiles,
		PerProcess:  max(perEngine, perWorker),
		PerPortPair: int64(cfg.PerSource()),
		Pending:     int64(cfg.MaxPending),
		Conns:       uas + w*posts,
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
