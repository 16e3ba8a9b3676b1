package auction_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nearnative/nearnative/apps/auction"
	"github.com/nearnative/nearnative/apps/auction/auctiontest"
	"github.com/nearnative/nearnative/internal/platform"
)

// TestBrokerUnreachable starts the auction with a broker address nothing
// listens on: the application server and nginx must report not ready,
// naming the broker, rather than serve auctions whose bids reach no other
// server.
func TestBrokerUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	s := auctiontest.Start(t, auctiontest.Options{AppServers: 1, BrokerAddr: dead, NoWait: true})
	ctx := context.Background()
	// Wait until the server has tried the broker (Tomcat takes a while on a
	// loaded machine); then it must say what is missing.
	var health error
	err = platform.WaitReady(ctx, 150*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		health = auction.AppReady(ctx, s.Apps[0])
		if health != nil && !strings.Contains(health.Error(), "unreachable") {
			return health
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nlast lines of its log:\n%s", err, s.LogTail("app1", 30))
	}
	if health == nil || !strings.Contains(health.Error(), "broker "+dead+" unreachable") {
		t.Errorf("app server health without a broker: %v", health)
	}
	err = auction.WebReady(ctx, s.Web)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "broker") {
		t.Errorf("nginx readiness: %v", err)
	}
	if tail := s.LogTail("app1", 20); !strings.Contains(tail, "unreachable") {
		t.Errorf("the app server's log does not say the broker is unreachable:\n%s", tail)
	}
}
