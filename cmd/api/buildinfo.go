package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version and revision may be set at build time:
//
//	go build -ldflags "-X main.version=v1.4.0 -X main.revision=$(git rev-parse HEAD)" ./cmd/api
//
// Left empty, they are read from the build information the Go toolchain
// embeds: the module version (v1.4.0 for `go install …@v1.4.0`, "(devel)"
// for a build in a checkout) and the VCS revision (present when the build
// ran in a git checkout; an image built without .git has none).
var version, revision string

// buildInfo says which code is running: ordersvc_build_info's labels and the
// "starting" line that `api serve` logs.
type buildInfo struct {
	Version, Revision, GoVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.fromToolchain(bi)
	}
	if b.Version == "" {
		b.Version = "unknown"
	}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	return b
}

// fromToolchain fills what the build time left empty from the build
// information the toolchain embedded.
func (b *buildInfo) fromToolchain(bi *debug.BuildInfo) {
	if b.Version == "" {
		b.Version = bi.Main.Version
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if b.Revision == "" {
				b.Revision = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && revision == "" && b.Revision != "" {
		b.Revision += "-dirty"
	}
}

// collector is ordersvc_build_info: always 1, its labels name the build, so
// that a dashboard shows which version each replica runs and a query can
// join on it (`* on (instance) group_left (version) ordersvc_build_info`).
func (b buildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ordersvc_build_info",
		Help: "The running build: version, VCS revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}
