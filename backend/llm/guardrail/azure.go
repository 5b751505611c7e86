package guardrail

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// azure is Azure AI Content Safety
// (https://{endpoint}/contentsafety/text:analyze and, for prompts,
// text:detectJailbreak, as agentgateway calls them): the texts joined by
// newlines are one text; harmful content at or above the severity
// threshold, a blocklist hit or a jailbreak rejects. Keys go in
// Ocp-Apim-Subscription-Key unless their location says otherwise; without
// a backendAuth the calls carry an Entra ID token of the implicit Azure
// credentials, as in agentgateway.
type azure struct {
	svc         *service
	analyzePath string // "" when analyzeText is not configured
	jailbreak   string // the detectJailbreak path, "" when not configured
	threshold   int
	blocklists  []string
	halt        *bool
}

// Content Safety defaults (agentgateway's).
const (
	defaultAnalyzeVersion   = "2024-09-01"
	defaultJailbreakVersion = "2024-02-15-preview"
	defaultSeverity         = 2
	// azureKeyHeader is where Content Safety takes a resource key.
	azureKeyHeader = "Ocp-Apim-Subscription-Key"
)

func (g *Guard) compileAzure(c *config.AzureContentSafety, ph phase, opts *Options) error {
	g.kind, g.unit = "azureContentSafety", PerMessage
	if c.AnalyzeText == nil && (c.DetectJailbreak == nil || ph == answerPhase) {
		if ph == answerPhase {
			return fieldError("azureContentSafety.analyzeText", "required: an answer is only checked by text analysis (the guard would check nothing)")
		}
		return fieldError("azureContentSafety", "at least one of analyzeText, detectJailbreak is required (the guard would check nothing)")
	}
	if ph == answerPhase && c.DetectJailbreak != nil {
		return fieldError("azureContentSafety.detectJailbreak", "only applies to request guards")
	}
	host := strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(c.Endpoint, "https://"), "http://"), "/")
	if host == "" || strings.ContainsAny(host, "/?#@ ") {
		return fieldError("azureContentSafety.endpoint", "must be a host name such as my-resource.cognitiveservices.azure.com")
	}
	t := cloudTarget(host, opts)
	if _, _, err := net.SplitHostPort(host); err == nil && t.tls {
		// An endpoint with its own port keeps it.
		t.addr = host
		t.host = host
	}
	const path = "azureContentSafety.policies"
	svc, err := newService(t, c.Policies, path, opts)
	if err != nil {
		return err
	}
	// Entra ID tokens come from the provider's azure credentials, for the
	// Cognitive Services scope of any kind but a Foundry resource.
	svc.creds, err = compileCredentials(config.AIProvider{OpenAI: &config.OpenAIProvider{}}, c.Policies, path, authRules{
		key:       true,
		azure:     true,
		takes:     "a key or azure credentials (or passthrough)",
		implicit:  &config.BackendAuth{Azure: &config.AzureAuth{Implicit: &config.EmptyObject{}}},
		keyHeader: azureKeyHeader,
	})
	if err != nil {
		return err
	}
	a := &azure{svc: svc, threshold: defaultSeverity}
	if at := c.AnalyzeText; at != nil {
		version := defaultAnalyzeVersion
		if at.APIVersion != nil {
			version = *at.APIVersion
		}
		a.analyzePath = "/contentsafety/text:analyze?api-version=" + url.QueryEscape(version)
		if at.SeverityThreshold != nil {
			a.threshold = *at.SeverityThreshold
		}
		a.blocklists, a.halt = at.BlocklistNames, at.HaltOnBlocklistHit
	}
	if dj := c.DetectJailbreak; dj != nil {
		version := defaultJailbreakVersion
		if dj.APIVersion != nil {
			version = *dj.APIVersion
		}
		a.jailbreak = "/contentsafety/text:detectJailbreak?api-version=" + url.QueryEscape(version)
	}
	g.checker = a
	g.services = append(g.services, svc)
	return nil
}

func (a *azure) check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	if a.analyzePath != "" {
		v, err := a.analyze(ctx, msgs, in)
		if err != nil || v.Action == Reject {
			return v, err
		}
	}
	if a.jailbreak != "" {
		return a.detectJailbreak(ctx, msgs, in)
	}
	return Verdict{Action: Pass}, nil
}

func (a *azure) analyze(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(a.analyzePath)
	defer c.release()
	b := append(c.body[:0], `{"text":`...)
	b = appendJoined(b, msgs, "\n")
	if len(a.blocklists) > 0 {
		b = append(b, `,"blocklistNames":[`...)
		for i, name := range a.blocklists {
			if i > 0 {
				b = append(b, ',')
			}
			b = llm.AppendString(b, name)
		}
		b = append(b, ']')
	}
	if a.halt != nil {
		b = append(b, `,"haltOnBlocklistHit":`...)
		b = strconv.AppendBool(b, *a.halt)
	}
	c.body = append(b, '}')
	a.svc.prepare(c)
	answer, err := a.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	reason, err := decodeAnalyzeText(answer, a.threshold)
	if err != nil || reason == "" {
		return Verdict{Action: Pass}, err
	}
	return Verdict{Action: Reject, Reason: reason}, nil
}

func (a *azure) detectJailbreak(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(a.jailbreak)
	defer c.release()
	b := append(c.body[:0], `{"text":`...)
	b = appendJoined(b, msgs, "\n")
	c.body = append(b, '}')
	a.svc.prepare(c)
	answer, err := a.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	detected, err := decodeJailbreak(answer)
	if err != nil || !detected {
		return Verdict{Action: Pass}, err
	}
	return Verdict{Action: Reject, Reason: "jailbreak detected"}, nil
}

// decodeAnalyzeText reads text:analyze's answer and says why it blocks
// ("" when it does not): a blocklist hit, or a category at or above the
// threshold. The answer must analyze categories, unless a blocklist hit
// stopped the analysis (haltOnBlocklistHit).
func decodeAnalyzeText(body []byte, threshold int) (string, error) {
	var answer struct {
		Blocklists []struct {
			Name string `json:"blocklistName"`
		} `json:"blocklistsMatch"`
		Categories []struct {
			Category string `json:"category"`
			Severity *int   `json:"severity"`
		} `json:"categoriesAnalysis"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", errors.New("invalid answer: " + err.Error())
	}
	if len(answer.Blocklists) > 0 {
		return reason("blocklist hit", []string{answer.Blocklists[0].Name}), nil
	}
	if answer.Categories == nil {
		return "", errors.New("invalid answer: no categoriesAnalysis")
	}
	var over []string
	for _, c := range answer.Categories {
		if c.Severity == nil {
			return "", errors.New("invalid answer: a category without severity")
		}
		if *c.Severity >= threshold {
			over = append(over, c.Category+" "+strconv.Itoa(*c.Severity))
		}
	}
	if len(over) == 0 {
		return "", nil
	}
	return reason("severity at or above "+strconv.Itoa(threshold), over), nil
}

// decodeJailbreak reads text:detectJailbreak's answer.
func decodeJailbreak(body []byte) (bool, error) {
	var answer struct {
		Analysis *struct {
			Detected *bool `json:"detected"`
		} `json:"jailbreakAnalysis"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return false, errors.New("invalid answer: " + err.Error())
	}
	if answer.Analysis == nil || answer.Analysis.Detected == nil {
		return false, errors.New("invalid answer: no jailbreakAnalysis.detected")
	}
	return *answer.Analysis.Detected, nil
}

var _ checker = (*azure)(nil)
