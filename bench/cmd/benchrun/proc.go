package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ---- CPU accounting from /proc

const clkTck = 100 // USER_HZ on Linux

// procTimes returns utime+stime and cutime+cstime of pid, in seconds.
func procTimes(pid int) (self, children float64, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("bad stat for %d", pid)
	}
	f := strings.Fields(s[i+2:]) // f[0] is field 3 (state)
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k-3], 64); return v }
	ppid = int(num(4))
	return (num(14) + num(15)) / clkTck, (num(16) + num(17)) / clkTck, ppid, nil
}

// apiCPU is the service's CPU seconds so far.
func apiCPU(pid int) float64 {
	self, _, _, err := procTimes(pid)
	if err != nil {
		return 0
	}
	return self
}

// postgresCPU is the CPU seconds of the whole server: the postmaster, its
// live children (backends and background processes) and, through the
// postmaster's cutime/cstime, every child that has exited.
func postgresCPU(postmaster int) float64 {
	self, kids, _, err := procTimes(postmaster)
	if err != nil {
		return 0
	}
	total := self + kids
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, _, ppid, err := procTimes(pid)
		if err == nil && ppid == postmaster {
			total += s
		}
	}
	return total
}

// machineCPU is the busy CPU seconds of the whole machine (every process,
// ours or not) from /proc/stat: user+nice+system+irq+softirq+steal.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	total := 0.0
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		total += v
	}
	return total / clkTck
}

// selfCPU is this process's CPU seconds (the load generator's cost).
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// postmasterPID reads the first line of postmaster.pid.
func postmasterPID(datadir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(datadir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// ---- the service process

type apiProc struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startAPI starts `api serve` with env added to a minimal environment and
// waits until /readyz answers.
func startAPI(ctx context.Context, bin, dbURL, logPath string, env []string) (*apiProc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + dbURL, "HTTP_ADDR=" + addr}, env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &apiProc{cmd: cmd, addr: addr, log: lf}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("api did not become ready; see %s", logPath)
}

func (p *apiProc) pid() int { return p.cmd.Process.Pid }

func (p *apiProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
}

// ---- round trips

// rtProxy forwards TCP connections to PostgreSQL and counts round trips:
// every time a client starts sending after the server last sent (or for the
// first time), that is one more request/response exchange on the wire, no
// matter how many statements it carried. It runs only while counting, so
// its cost never enters a throughput run.
type rtProxy struct {
	ln     net.Listener
	target string
	turns  atomic.Int64
}

func newRTProxy(target string) (*rtProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &rtProxy{ln: ln, target: target}
	go p.serve()
	return p, nil
}

func (p *rtProxy) addr() string { return p.ln.Addr().String() }

func (p *rtProxy) close() { _ = p.ln.Close() }

func (p *rtProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *rtProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	var serverSpoke atomic.Bool
	serverSpoke.Store(true)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				serverSpoke.Store(true)
				if _, werr := client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		client.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if serverSpoke.Swap(false) {
				p.turns.Add(1)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	server.Close()
}

// ---- the statement log

// logMark is a position in the server log.
func logMark(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// statements reads the statements that application app sent after mark,
// as logged by log_statement=all, and names each: the sqlc query name when
// the text carries one ("-- name: X"), otherwise its first line.
func statements(path string, mark int64, app string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(mark, io.SeekStart); err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	tag := "] " + app + " "
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, tag) {
			continue
		}
		_, rest, ok := strings.Cut(line, "LOG:  ")
		if !ok {
			continue
		}
		var text string
		switch {
		case strings.HasPrefix(rest, "statement: "):
			text = strings.TrimPrefix(rest, "statement: ")
		case strings.HasPrefix(rest, "execute "):
			_, text, _ = strings.Cut(rest, ": ")
		default:
			continue
		}
		if _, name, ok := strings.Cut(text, "-- name: "); ok {
			text, _, _ = strings.Cut(name, " ")
		}
		out = append(out, strings.TrimSuffix(strings.TrimSpace(text), ";"))
	}
	return out, sc.Err()
}
