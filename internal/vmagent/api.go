// Package vmagent is the guest side of the vm platform: the nearnative binary
// itself runs as PID 1 of a QEMU guest (from a small initramfs), mounts the
// guest's root disk, brings up its network from the kernel command line and
// serves a tiny authenticated HTTP/JSON API through which the host starts and
// stops servers, runs jobs, reads CPU times and powers the guest off. The
// Client type is the host side of that API.
package vmagent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/internal/ready"
	"github.com/nearnative/nearnative/internal/sysinfo"
)

// Port is the TCP port the agent listens on, on the guest's address.
const Port = 7977

// Kernel command line keys the agent reads.
const (
	ParamIP   = "nn.ip"   // guest address with prefix, 10.213.7.2/24
	ParamGW   = "nn.gw"   // host address on the bridge (no default route is set)
	ParamName = "nn.name" // host name of the guest
	// ParamRoutes lists, comma-separated, the subnets the guest reaches
	// through ParamGW: a client host's link, whose connections this
	// machine routes to the guest.
	ParamRoutes = "nn.routes"
	// ParamToken is the bearer token the host must present, when it comes
	// on the command line; the host passes it as the firmware file
	// TokenFwCfg instead, since the command line of QEMU is readable by
	// every local user.
	ParamToken = "nn.token"
)

// TokenFwCfg is the QEMU firmware configuration file carrying the agent's
// token (-fw_cfg name=TokenFwCfg,file=PATH, PATH readable by root only); the
// guest reads it through its qemu_fw_cfg driver at TokenFwCfgPath.
const (
	TokenFwCfg     = "opt/nearnative/token"
	TokenFwCfgPath = "/sys/firmware/qemu_fw_cfg/by_name/" + TokenFwCfg + "/raw"
)

// File is a file written into a process's directory before it starts.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode"`
}

// Proc describes a process to start or a job to run.
type Proc struct {
	Name  string            `json:"name"`
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env,omitempty"`
	Dir   string            `json:"dir"`
	Files []File            `json:"files,omitempty"`
	User  string            `json:"user,omitempty"`
	// CPUSet confines the process to these CPUs (taskset), "" for none.
	CPUSet string `json:"cpuset,omitempty"`
	// CPUs (a quota in CPUs) and MemoryBytes limit the process and its
	// children through a cgroup of their own, as native does on this
	// machine (package cgroup, under the run of Env's NEARNATIVE_RUN; the
	// agent needs root); 0 for none. The group goes when the process has
	// ended.
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// Own lists directories given to User before the process starts
	// (data directories copied in or mounted).
	Own []string `json:"own,omitempty"`
	// Stdin is the standard input of a job or process (none when nil).
	Stdin []byte `json:"stdin,omitempty"`
}

// Sched is the answer to /sched: how often the threads of a process have
// moved between CPUs.
type Sched struct {
	Migrations int64 `json:"migrations"`
}

// Status is the answer to /status: whether a started process still runs,
// how it ended, and the tail of its output.
type Status struct {
	Running bool   `json:"running"`
	Exit    string `json:"exit,omitempty"`
	Tail    string `json:"tail,omitempty"`
}

// Started is the answer to /start.
type Started struct {
	PID int `json:"pid"`
}

// JobResult is the answer to /run.
type JobResult struct {
	Stdout   []byte        `json:"stdout"`
	Stderr   []byte        `json:"stderr"`
	ExitCode int           `json:"exit_code"`
	Wall     time.Duration `json:"wall_ns"`
	// CPU is the job's user+system time, its reaped children's included.
	CPU   time.Duration `json:"cpu_ns,omitempty"`
	Error string        `json:"error,omitempty"`
}

// StopRequest asks the agent to stop a started process.
type StopRequest struct {
	PID     int           `json:"pid"`
	Timeout time.Duration `json:"timeout_ns"`
}

// Stopped is the answer to /stop: the process's output so far.
type Stopped struct {
	Log []byte `json:"log"`
}

// CPU is the answer to /cpu.
type CPU struct {
	Time time.Duration `json:"time_ns"`
}

// Machine is the answer to /machine: the whole machine's CPU counters.
type Machine struct {
	// BootID names the running kernel: machines that share one (hosts of
	// the test bed, namespaces of one machine) share their counters.
	BootID string    `json:"boot_id"`
	Stat   string    `json:"stat"` // /proc/stat
	At     time.Time `json:"at"`   // when Stat was read, on the machine's clock
}

// Client talks to one guest's agent.
type Client struct {
	Base  string // http://10.213.7.2:7977
	Token string
	HTTP  *http.Client
}

// NewClient returns a client for the agent at host.
func NewClient(host, token string) *Client {
	return NewClientAddr(host+":"+strconv.Itoa(Port), token)
}

// NewClientDial returns a client for the agent at host:port reached
// through dial: the agent of a remote host, reached over a channel of an SSH
// connection rather than a port open to the network. The API and the client
// are those of a guest's agent; only the transport differs.
func NewClientDial(addr, token string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	return &Client{Base: "http://" + addr, Token: token,
		HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: dial}}}
}

// NewClientAddr returns a client for the agent at host:port.
func NewClientAddr(addr, token string) *Client {
	return &Client{Base: "http://" + addr, Token: token,
		HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

func (c *Client) call(ctx context.Context, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("guest agent %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("guest agent %s: reading answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("guest agent %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("guest agent %s: %w", path, err)
		}
	}
	return nil
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error { return c.call(ctx, "/ping", nil, nil) }

// WaitReady pings until the agent answers or ctx ends (internal/ready's
// loop, each ping bounded to 2 s); the error joins ctx's and the last
// ping's.
func (c *Client) WaitReady(ctx context.Context) error {
	err := ready.Loop{Attempt: 2 * time.Second}.Wait(ctx, c.Ping)
	var te *ready.TimeoutError
	if errors.As(err, &te) {
		return errors.Join(ctx.Err(), te.Last)
	}
	return err
}

// Start starts a process and returns its pid.
func (c *Client) Start(ctx context.Context, p Proc) (int, error) {
	var s Started
	err := c.call(ctx, "/start", p, &s)
	return s.PID, err
}

// Stop stops a process started with Start and returns its output.
func (c *Client) Stop(ctx context.Context, pid int, timeout time.Duration) ([]byte, error) {
	var s Stopped
	err := c.call(ctx, "/stop", StopRequest{PID: pid, Timeout: timeout}, &s)
	return s.Log, err
}

// Run runs a job to completion.
func (c *Client) Run(ctx context.Context, p Proc) (JobResult, error) {
	var r JobResult
	err := c.call(ctx, "/run", p, &r)
	return r, err
}

// CPUTime returns the user+system CPU time of pid and its living
// descendants, with the children each has reaped (see ProcCPU).
func (c *Client) CPUTime(ctx context.Context, pid int) (time.Duration, error) {
	var r CPU
	err := c.call(ctx, "/cpu?pid="+strconv.Itoa(pid), nil, &r)
	return r.Time, err
}

// MachineCPU reads the machine's /proc/stat (sysinfo.ReadCPU there) and
// its boot ID. The sample's time is the machine's own clock: deltas of two
// samples of one machine are exact, whatever its offset from this one.
func (c *Client) MachineCPU(ctx context.Context) (bootID string, s sysinfo.CPUSample, err error) {
	var m Machine
	if err := c.call(ctx, "/machine", nil, &m); err != nil {
		return "", s, err
	}
	if s, err = sysinfo.ParseStat(strings.NewReader(m.Stat)); err != nil {
		return "", s, fmt.Errorf("the machine's /proc/stat: %w", err)
	}
	s.At = m.At
	return m.BootID, s, nil
}

// Status says whether pid still runs and gives the tail of its output.
func (c *Client) Status(ctx context.Context, pid int) (Status, error) {
	var r Status
	err := c.call(ctx, "/status?pid="+strconv.Itoa(pid), nil, &r)
	return r, err
}

// Migrations returns how often pid's threads have moved between CPUs.
func (c *Client) Migrations(ctx context.Context, pid int) (int64, error) {
	var r Sched
	err := c.call(ctx, "/sched?pid="+strconv.Itoa(pid), nil, &r)
	return r.Migrations, err
}

// Poweroff asks the guest to sync and power off.
func (c *Client) Poweroff(ctx context.Context) error { return c.call(ctx, "/poweroff", nil, nil) }

// NewToken returns a fresh random API token.
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
