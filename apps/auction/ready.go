package auction

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Each probe below makes one attempt; internal/ready's loop (through
// platform.WaitReady or a deployment's readiness wait) repeats one until it
// passes.

// PostgresReady connects to the auction database at addr as the application
// does and reads the live auctions' count: the template is there and
// accepts the application's password.
func PostgresReady(ctx context.Context, addr string) error {
	conn, err := pgx.Connect(ctx, DSN(addr, DBUser, DBPassword, DBName))
	if err != nil {
		return fmt.Errorf("postgres %s: %w", addr, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM auction WHERE current").Scan(&n); err != nil {
		return fmt.Errorf("postgres %s: reading the auctions: %w", addr, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres %s: the database has no live auctions: is the data template loaded?", addr)
	}
	return nil
}

// DSN is a pgx connection string for addr (host:port).
func DSN(addr, user, password, db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=5", user, password, addr, db)
}

// BrokerReady opens an AMQP connection and a channel to RabbitMQ at addr
// with the application's credentials.
func BrokerReady(ctx context.Context, addr string) error {
	cfg := amqp.Config{
		Heartbeat: 10 * time.Second,
		Dial: func(network, a string) (net.Conn, error) {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return d.DialContext(dctx, network, a)
		},
	}
	conn, err := amqp.DialConfig(fmt.Sprintf("amqp://%s:%s@%s/", BrokerUser, BrokerPassword, addr), cfg)
	if err != nil {
		return fmt.Errorf("rabbitmq %s: %w", addr, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq %s: opening a channel: %w", addr, err)
	}
	return ch.Close()
}

// probeClient is the probes' HTTP client: no keep-alive, short timeouts.
var probeClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// getOK GETs url and returns the body of a 200 answer, else an error with
// the status and the server's error text.
func getOK(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("GET %s: %s: %s", url, status, e.Error)
		}
		return nil, fmt.Errorf("GET %s: %s", url, status)
	}
	return b, nil
}

// AppReady asks the application server at addr for its health: it answers
// 200 only once it reaches the database and the broker and runs the live
// auctions.
func AppReady(ctx context.Context, addr string) error {
	b, err := getOK(ctx, "http://"+addr+"/auction/health")
	if err != nil {
		return fmt.Errorf("app server %s: %w", addr, err)
	}
	var h struct {
		Status       string
		LiveAuctions int
	}
	if err := json.Unmarshal(b, &h); err != nil || h.Status != "ok" {
		return fmt.Errorf("app server %s: unexpected health answer %q", addr, b)
	}
	if h.LiveAuctions == 0 {
		return fmt.Errorf("app server %s: no live auctions yet", addr)
	}
	return nil
}

// WebReady fetches the home page from nginx at addr and the health of an
// application server through it.
func WebReady(ctx context.Context, addr string) error {
	b, err := getOK(ctx, "http://"+addr+"/")
	if err != nil {
		return fmt.Errorf("nginx %s: %w", addr, err)
	}
	if !strings.Contains(string(b), "nearnative-auction") {
		return fmt.Errorf("nginx %s: the home page is not the auction's", addr)
	}
	if _, err := getOK(ctx, "http://"+addr+"/auction/health"); err != nil {
		return fmt.Errorf("nginx %s: %w", addr, err)
	}
	return nil
}
