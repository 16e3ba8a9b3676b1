package oltp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nearnative/nearnative/apps/dvdstore"
	"github.com/nearnative/nearnative/internal/driver"
)

// NewTransport returns the HTTP/1.1 transport the http users of one driver
// share: keep-alive with up to maxConnsPerHost idle connections per web
// server (give it the number of users, so that no user waits for a
// connection or opens a new one per request), no compression (the pages
// are small; DVD Store's driver did not ask for it), no proxy.
// Its connections are opened with dial (nil: net.Dialer), which the driver
// gives from the run's client host.
func NewTransport(maxConnsPerHost int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           driver.DialWithin(dial, 10*time.Second),
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   maxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 60 * time.Second,
	}
}

// HTTPShop is one user's browser on a DVD Store web server: its own cookie
// jar, requests through the shared transport. The shop's pages keep no
// session (DVD Store passes the customer id with each request), so the jar
// only holds what a server might set.
type HTTPShop struct {
	base   string
	client *http.Client
}

// NewHTTPShop returns a user's client for the web server at addr (host:port).
func NewHTTPShop(addr string, tr http.RoundTripper) (*HTTPShop, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("web server address %q: %w", addr, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	return &HTTPShop{base: "http://" + addr, client: &http.Client{Transport: tr, Jar: jar, Timeout: 2 * time.Minute}}, nil
}

// Close implements Shop; the shared transport keeps its connections.
func (s *HTTPShop) Close(context.Context) error { return nil }

var (
	reCustomerID = regexp.MustCompile(`class="customerid">(\d+)<`)
	reOrderID    = regexp.MustCompile(`class="orderid">(\d+)<`)
	reCount      = regexp.MustCompile(`class="count">(\d+)<`)
	rePrice      = regexp.MustCompile(`<td class="prod_id">(\d+)</td><td class="price">(\d+)\.(\d\d)</td>`)
	reFailure    = regexp.MustCompile(`<p class="(error|rollback|taken)" data-sqlstate="([^"]*)">([^<]*)</p>`)
	tags         = regexp.MustCompile(`<[^>]*>`)
)

// page is a fetched page.
type page struct {
	status int
	body   string
}

// do sends a request and reads the page. A transport failure, an HTTP
// status of 400 or more, or a page of class "error" is an error naming the
// request; "rollback" and "taken" pages come back as ErrRollback and
// ErrTaken, a deadlock (503 with SQLSTATE 40P01) as ErrDeadlock.
func (s *HTTPShop) do(ctx context.Context, method, path string, form url.Values) (page, error) {
	var body io.Reader
	target := s.base + path
	if method == http.MethodGet && form != nil {
		target += "?" + form.Encode()
	} else if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return page{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	what := method + " " + path
	resp, err := s.client.Do(req)
	if err != nil {
		return page{}, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return page{}, fmt.Errorf("%s: reading the page: %w", what, err)
	}
	p := page{status: resp.StatusCode, body: string(b)}
	if m := reFailure.FindStringSubmatch(p.body); m != nil {
		class, state, msg := m[1], m[2], m[3]
		switch {
		case class == "rollback":
			return p, fmt.Errorf("%s: %w (%s)", what, ErrRollback, msg)
		case class == "taken":
			return p, fmt.Errorf("%s: %w (%s)", what, ErrTaken, msg)
		case state == "40P01":
			return p, fmt.Errorf("%s: HTTP %d: %w (%s)", what, p.status, ErrDeadlock, msg)
		case state != "":
			return p, fmt.Errorf("%s: HTTP %d: the page reports SQLSTATE %s: %s", what, p.status, state, msg)
		default:
			return p, fmt.Errorf("%s: HTTP %d: the page reports an error: %s", what, p.status, msg)
		}
	}
	if p.status >= 400 {
		return p, fmt.Errorf("%s: HTTP %d: %s", what, p.status, snippet(p.body))
	}
	return p, nil
}

// snippet is a page's text without tags, shortened, for error messages.
func snippet(s string) string {
	s = strings.Join(strings.Fields(tags.ReplaceAllString(s, " ")), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func (s *HTTPShop) number(p page, re *regexp.Regexp, what string) (int, error) {
	m := re.FindStringSubmatch(p.body)
	if m == nil {
		return 0, fmt.Errorf("%s: the page has no %s: %s", what, re.String(), snippet(p.body))
	}
	return strconv.Atoi(m[1])
}

// NewCustomer implements Shop: POST /newcustomer.php.
func (s *HTTPShop) NewCustomer(ctx context.Context, c dvdstore.Customer) (int, error) {
	f := url.Values{"firstname": {c.FirstName}, "lastname": {c.LastName}, "address1": {c.Address1}, "address2": {c.Address2},
		"city": {c.City}, "state": {c.State}, "country": {c.Country}, "region": {strconv.Itoa(c.Region)}, "email": {c.Email},
		"phone": {c.Phone}, "creditcardtype": {strconv.Itoa(c.CreditCardType)}, "creditcard": {c.CreditCard},
		"creditcardexpiration": {c.CreditCardExpiration}, "username": {c.Username}, "password": {c.Password},
		"age": {strconv.Itoa(c.Age)}, "income": {strconv.Itoa(c.Income)}, "gender": {c.Gender}}
	if c.Region == 1 {
		f.Set("zip", strconv.Itoa(c.Zip))
	}
	p, err := s.do(ctx, http.MethodPost, "/newcustomer.php", f)
	if err != nil {
		return 0, err
	}
	return s.number(p, reCustomerID, "POST /newcustomer.php")
}

// Login implements Shop: GET /login.php.
func (s *HTTPShop) Login(ctx context.Context, username, password string) (int, int, error) {
	p, err := s.do(ctx, http.MethodGet, "/login.php", url.Values{"username": {username}, "password": {password}})
	if err != nil {
		return 0, 0, err
	}
	id, err := s.number(p, reCustomerID, "GET /login.php")
	return id, strings.Count(p.body, `<tr class="purchase">`), err
}

// Browse implements Shop: GET /browse.php.
func (s *HTTPShop) Browse(ctx context.Context, b Browse) (int, error) {
	p, err := s.do(ctx, http.MethodGet, "/browse.php", url.Values{"type": {b.By}, "value": {b.Value}, "batch": {strconv.Itoa(b.Batch)}})
	if err != nil {
		return 0, err
	}
	n, err := s.number(p, reCount, "GET /browse.php")
	if err == nil && strings.Count(p.body, `<tr class="item">`) != n {
		err = fmt.Errorf("GET /browse.php: the page says %d items but lists %d", n, strings.Count(p.body, `<tr class="item">`))
	}
	return n, err
}

// Prices implements Shop: GET /prices.php.
func (s *HTTPShop) Prices(ctx context.Context, ids []int) (map[int]int, error) {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	p, err := s.do(ctx, http.MethodGet, "/prices.php", url.Values{"ids": {strings.Join(list, ",")}})
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, m := range rePrice.FindAllStringSubmatch(p.body, -1) {
		id, _ := strconv.Atoi(m[1])
		dollars, _ := strconv.Atoi(m[2])
		cents, _ := strconv.Atoi(m[3])
		out[id] = dollars*100 + cents
	}
	return out, nil
}

// Purchase implements Shop: POST /purchase.php.
func (s *HTTPShop) Purchase(ctx context.Context, customer, net, tax int, items []Item) (int, error) {
	f := url.Values{"customerid": {strconv.Itoa(customer)}, "netamount": {cents(net)}, "taxamount": {cents(tax)}, "totalamount": {cents(net + tax)}}
	for _, it := range items {
		f.Add("prod_id[]", strconv.Itoa(it.ProdID))
		f.Add("quantity[]", strconv.Itoa(it.Quantity))
	}
	p, err := s.do(ctx, http.MethodPost, "/purchase.php", f)
	if err != nil {
		return 0, err
	}
	return s.number(p, reOrderID, "POST /purchase.php")
}

func cents(c int) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }
