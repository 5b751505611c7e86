package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// maxAnswer bounds what check reads of an answer.
const maxAnswer = 1 << 20

// recordHeader asks bench/llmupstream to keep the request's body for GET
// /last.
const recordHeader = "X-Bench-Record"

// The gateway's LLM route in bench/gateway.yaml: what it must have done to
// the request before the provider sees it.
const (
	gatewayModel       = "gpt-4o-mini" // modelAliases: {fast: gpt-4o-mini}
	gatewayTemperature = 0.2           // defaults: {temperature: 0.2}
)

func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	target := fs.String("url", "", "chat completions URL of the target")
	upstream := fs.String("upstream", "", "base URL of bench/llmupstream")
	bodyFile := fs.String("body", "", "request body (JSON)")
	key := fs.String("key", "", "API key to send as Authorization: Bearer (none if empty)")
	expect := fs.String("expect", "raw", "what reaches the provider: raw (the body as sent) or gateway (as the gateway's LLM route rewrites it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || *upstream == "" || *bodyFile == "" || (*expect != "raw" && *expect != "gateway") {
		return errors.New("check needs -url, -upstream, -body and -expect raw|gateway")
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if err := sendRecorded(client, *target, body, *key); err != nil {
		return err
	}
	seen, err := get(client, strings.TrimSuffix(*upstream, "/")+"/last")
	if err != nil {
		return fmt.Errorf("asking the provider what it got: %w", err)
	}
	if *expect == "raw" {
		if !bytes.Equal(seen, body) {
			return fmt.Errorf("the provider got %d bytes that differ from the %d sent", len(seen), len(body))
		}
		return nil
	}
	return checkRewritten(body, seen)
}

// sendRecorded sends one chat completion marked for recording and checks
// the answer is a chat completion with usage.
func sendRecorded(client *http.Client, url string, body []byte, key string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(recordHeader, "1")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %.300s", url, resp.StatusCode, answer)
	}
	var c struct {
		Object string `json:"object"`
		Usage  struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(answer, &c); err != nil || c.Object != "chat.completion" || c.Usage.TotalTokens == 0 {
		return fmt.Errorf("POST %s: not a chat completion with usage: %.300s", url, answer)
	}
	return nil
}

func get(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %.300s", url, resp.StatusCode, b)
	}
	return b, nil
}

// chatRequest is what check reads of a chat completion request.
type chatRequest struct {
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature"`
	Messages    []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// checkRewritten checks that seen is sent, rewritten by the gateway's LLM
// route: the model alias resolved, the default temperature added, every
// e-mail address of the prompt masked, the messages otherwise kept.
func checkRewritten(sent, seen []byte) error {
	var in, out chatRequest
	if err := json.Unmarshal(sent, &in); err != nil {
		return fmt.Errorf("the body sent: %w", err)
	}
	if err := json.Unmarshal(seen, &out); err != nil {
		return fmt.Errorf("what the provider got: %w", err)
	}
	var problems []string
	if out.Model != gatewayModel {
		problems = append(problems, fmt.Sprintf("model %q, want %q", out.Model, gatewayModel))
	}
	if out.Temperature == nil || *out.Temperature != gatewayTemperature {
		problems = append(problems, fmt.Sprintf("temperature %v, want %v", deref(out.Temperature), gatewayTemperature))
	}
	if len(out.Messages) != len(in.Messages) {
		problems = append(problems, fmt.Sprintf("%d messages, want %d", len(out.Messages), len(in.Messages)))
	}
	for _, email := range emailsIn(sent) {
		if bytes.Contains(seen, []byte(email)) {
			problems = append(problems, fmt.Sprintf("the e-mail address %s was not masked", email))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the gateway did not rewrite the request as configured: %s", strings.Join(problems, "; "))
	}
	return nil
}

func deref(f *float64) any {
	if f == nil {
		return "absent"
	}
	return *f
}

// emailsIn finds the e-mail addresses of the benchmark's body: words with
// an '@' between a local part and a dotted domain. It need not be a full
// parser; it only has to find the ones the body holds.
func emailsIn(b []byte) []string {
	var out []string
	for _, w := range strings.FieldsFunc(string(b), func(r rune) bool {
		return r == ' ' || r == '"' || r == ',' || r == '(' || r == ')' || r == '\n'
	}) {
		local, domain, ok := strings.Cut(w, "@")
		if ok && local != "" && strings.Contains(strings.TrimRight(domain, "."), ".") {
			out = append(out, strings.TrimRight(w, "."))
		}
	}
	return out
}
