package auction

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"time"

	"github.com/nearnative/nearnative/internal/driver"
)

// Client holds what all simulated users share: the application's address
// and one tuned HTTP transport (keep-alive connections, no limit per host).
// Each user has its own cookie jar and browser cache (User).
type Client struct {
	base string
	tr   *http.Transport
}

// NewClient returns a client of the auction served by nginx at addr
// (host:port, as the driver's client host reaches it), opening connections
// with dial (nil: net.Dialer, from this machine).
func NewClient(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	return &Client{
		base: "http://" + addr,
		tr: &http.Transport{
			DialContext:         driver.DialWithin(dial, 5*time.Second),
			MaxIdleConns:        0, // no limit
			MaxIdleConnsPerHost: 100_000,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			// A long poll answers within LongPollTimeout of the item idle
			// time; the operation's context bounds it.
			ResponseHeaderTimeout: 0,
		},
	}
}

// Close drops the idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// OpTimeout bounds one request, so that a server that never answers is a
// failure rather than a stuck user; a long poll is answered within 1.5
// times the item idle time (45 s with Weathervane's 30 s).
const OpTimeout = 2 * time.Minute

// Representations of the application's JSON (apps/auction/java Model.java).

// Auction is an auction.
type Auction struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	Category      string `json:"category"`
	State         string `json:"state"`
	CurrentItemID *int64 `json:"currentItemId"`
	Round         int    `json:"round"`
}

// Image is an item's image with the URL of each size.
type Image struct {
	ID        int64  `json:"id"`
	Thumbnail string `json:"thumbnail"`
	Preview   string `json:"preview"`
	Full      string `json:"full"`
}

// Item is an item's details.
type Item struct {
	ID           int64    `json:"id"`
	AuctionID    *int64   `json:"auctionId"`
	Seq          int      `json:"seq"`
	SellerID     int64    `json:"sellerId"`
	Name         string   `json:"name"`
	StartingBid  float64  `json:"startingBid"`
	State        string   `json:"state"`
	HighAmount   *float64 `json:"highAmount"`
	HighBidderID *int64   `json:"highBidderId"`
	BidCount     int      `json:"bidCount"`
	Version      int      `json:"version"`
	Images       []Image  `json:"images"`
}

// ItemState is an item's bidding state: GetNextBid's answer and part of
// PlaceBid's.
type ItemState struct {
	AuctionID int64    `json:"auctionId"`
	ItemID    int64    `json:"itemId"`
	Round     int      `json:"round"`
	Seq       int      `json:"seq"`
	State     string   `json:"state"`
	Version   int      `json:"version"`
	BidCount  int      `json:"bidCount"`
	Amount    *float64 `json:"amount"`
	BidderID  *int64   `json:"bidderId"`
}

// Item states.
const (
	StatePending  = "PENDING"
	StateOpen     = "OPEN"
	StateLastCall = "LASTCALL"
	StateSold     = "SOLD"
	StateNotSold  = "NOTSOLD"
)

// Live reports whether the item takes bids.
func (s ItemState) Live() bool { return s.State == StateOpen || s.State == StateLastCall }

// BidResult is PlaceBid's answer: Result is ACCEPTED or REJECTED.
type BidResult struct {
	Result string    `json:"result"`
	Reason string    `json:"reason"`
	Item   ItemState `json:"item"`
}

// Profile is a user's profile.
type Profile struct {
	ID          int64   `json:"id"`
	Email       string  `json:"email"`
	FirstName   string  `json:"firstName"`
	LastName    string  `json:"lastName"`
	CreditLimit float64 `json:"creditLimit"`
}

type page[T any] struct {
	Page     int    `json:"page"`
	PageSize int    `json:"pageSize"`
	Total    *int64 `json:"total"`
	Items    []T    `json:"items"`
}

// browserCacheMax bounds each user's browser cache.
const browserCacheMax = 2000

// session is what one user's requests share: its cookie jar and browser
// cache. It is replaced at logout.
type session struct {
	http *http.Client
	mu   sync.Mutex
	// etags of static files; images are immutable and kept by URL.
	etags  map[string]string
	images map[string]bool
}

func newSession(c *Client) *session {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &session{
		http:   &http.Client{Transport: c.tr, Jar: jar},
		etags:  map[string]string{},
		images: map[string]bool{},
	}
}

// HTTPError is a request that failed at the HTTP level: a status >= 400 or
// an error marker in the body.
type HTTPError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// do sends one request and decodes a JSON answer into out (unless nil).
// body is sent as JSON, or as is when it is []byte (with contentType).
func (s *session) do(ctx context.Context, c *Client, method, path string, body any, contentType string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	var rd io.Reader
	if b, ok := body.([]byte); ok {
		rd = bytes.NewReader(b)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		rd, contentType = bytes.NewReader(b), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 || bytes.HasPrefix(bytes.TrimSpace(b), []byte(`{"error"`)) {
		return &HTTPError{Method: method, Path: path, Status: resp.StatusCode, Message: errorText(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

// errorText is the application's error message, or the start of the body.
func errorText(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// static GETs a static file as a browser does: with the ETag it has
// cached, so an unchanged file costs a 304.
func (s *session) static(ctx context.Context, c *Client, path string) error {
	ctx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	s.mu.Lock()
	if e := s.etags[path]; e != "" {
		req.Header.Set("If-None-Match", e)
	}
	s.mu.Unlock()
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
		return nil
	case resp.StatusCode >= 400:
		return &HTTPError{Method: "GET", Path: path, Status: resp.StatusCode, Message: errorText(b)}
	case len(b) == 0:
		return &HTTPError{Method: "GET", Path: path, Status: resp.StatusCode, Message: "empty answer"}
	}
	if e := resp.Header.Get("ETag"); e != "" {
		s.mu.Lock()
		if len(s.etags) >= browserCacheMax {
			clear(s.etags)
		}
		s.etags[path] = e
		s.mu.Unlock()
	}
	return nil
}

// image GETs an image unless the browser cache holds it (images never
// change).
func (s *session) image(ctx context.Context, c *Client, url string) error {
	s.mu.Lock()
	cached := s.images[url]
	s.mu.Unlock()
	if cached {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: reading the image: %w", url, err)
	}
	if resp.StatusCode >= 400 {
		return &HTTPError{Method: "GET", Path: url, Status: resp.StatusCode, Message: errorText(b)}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "image/") || len(b) == 0 {
		return &HTTPError{Method: "GET", Path: url, Status: resp.StatusCode, Message: fmt.Sprintf("not an image (%q, %d bytes)", ct, len(b))}
	}
	s.mu.Lock()
	if len(s.images) >= browserCacheMax {
		clear(s.images)
	}
	s.images[url] = true
	s.mu.Unlock()
	return nil
}

// cents converts an amount in dollars to cents.
func cents(x float64) int64 { return int64(math.Round(x * 100)) }

// money is an amount in cents as the JSON number the application reads.
func money(c int64) json.Number { return json.Number(fmt.Sprintf("%d.%02d", c/100, c%100)) }

// errNoAccount is returned by Login when every registered user is logged in.
var errNoAccount = errors.New("login: every registered user is logged in: the data is too small for this many users")
