package testauth

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// Browse opens a gateway's sign-in link as a person's browser would: it
// follows the redirects, signing in at this package's authorization server
// as user, and, when the gateway's start page asks for a credential (a
// form), posts credential. It returns the final status and page.
func Browse(link, user, credential string) (int, string, error) {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/authorize" { // the person signs in at the authorization server
			q := req.URL.Query()
			q.Set("user", user)
			req.URL.RawQuery = q.Encode()
		}
		return nil
	}}
	resp, err := hc.Get(link)
	if err != nil {
		return 0, "", err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<form") {
		return resp.StatusCode, string(page), nil
	}
	resp, err = hc.PostForm(link, url.Values{"credential": {credential}})
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	page, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(page), nil
}
