// Command testtimings summarises `go test -json` output: the wall time of
// each package and its slowest tests, to see where `make test` spends its
// time.
//
//	go test -count=1 -json ./... | go run ./scripts/testtimings
//	go run ./scripts/testtimings -top 20 < test.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type timing struct {
	name    string
	action  string
	seconds float64
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest tests to list")
	flag.Parse()
	if err := summarise(os.Stdin, os.Stdout, *top); err != nil {
		fmt.Fprintln(os.Stderr, "testtimings:", err)
		os.Exit(1)
	}
}

func summarise(r io.Reader, w io.Writer, top int) error {
	var packages, tests []timing
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Action != "pass" && e.Action != "fail") {
			continue
		}
		switch {
		case e.Test == "":
			packages = append(packages, timing{e.Package, e.Action, e.Elapsed})
		case !strings.Contains(e.Test, "/"):
			tests = append(tests, timing{e.Package[strings.LastIndex(e.Package, "/")+1:] + " " + e.Test, e.Action, e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Slice(packages, func(i, j int) bool { return packages[i].name < packages[j].name })
	sort.Slice(tests, func(i, j int) bool { return tests[i].seconds > tests[j].seconds })
	fmt.Fprintln(w, "package wall times (s):")
	for _, p := range packages {
		fmt.Fprintf(w, "  %7.1f  %-4s %s\n", p.seconds, p.action, p.name)
	}
	fmt.Fprintf(w, "slowest %d top-level tests (s; a parallel test's time excludes its wait to start):\n", min(top, len(tests)))
	for _, t := range tests[:min(top, len(tests))] {
		fmt.Fprintf(w, "  %7.1f  %-4s %s\n", t.seconds, t.action, t.name)
	}
	return nil
}
