package guardrail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// modelArmor is a Google Cloud Model Armor template (POST
// https://modelarmor.{location}.rep.googleapis.com/v1/projects/{project}/locations/{location}/templates/{template}:sanitizeUserPrompt,
// or :sanitizeModelResponse for answers, with a Google access token): the
// texts joined by newlines are one text, rejected when any filter matches.
// Model Armor does not mask here, as in agentgateway.
type modelArmor struct {
	svc    *service
	path   string
	prompt bool
}

// defaultModelArmorLocation is agentgateway's default location.
const defaultModelArmorLocation = "us-central1"

func (g *Guard) compileModelArmor(c *config.GoogleModelArmor, ph phase, opts *Options) error {
	g.kind, g.unit = "googleModelArmor", PerMessage
	location := defaultModelArmorLocation
	if c.Location != nil {
		location = *c.Location
	}
	if !provider.ValidHostLabel(location) {
		return fieldError("googleModelArmor.location", "must be a location such as us-central1 (lower-case letters, digits and hyphens): it becomes part of the host name")
	}
	for _, f := range [...]struct{ name, value string }{{"projectId", c.ProjectID}, {"templateId", c.TemplateID}} {
		if f.value == "" || strings.ContainsAny(f.value, "/?#% ") {
			return fieldError("googleModelArmor."+f.name, "must be a non-empty name without '/', '?', '#', '%' or spaces: it becomes a segment of the path")
		}
	}
	const path = "googleModelArmor.policies"
	host := "modelarmor." + location + ".rep.googleapis.com"
	svc, err := newService(cloudTarget(host, opts), c.Policies, path, opts)
	if err != nil {
		return err
	}
	svc.creds, err = compileCredentials(config.AIProvider{Vertex: &config.VertexProvider{Region: location, ProjectID: c.ProjectID}}, c.Policies, path, authRules{
		gcp:   true,
		takes: "gcp access tokens (or passthrough)",
	})
	if err != nil {
		return err
	}
	m := &modelArmor{svc: svc, prompt: ph == promptPhase}
	method := ":sanitizeModelResponse"
	if m.prompt {
		method = ":sanitizeUserPrompt"
	}
	m.path = "/v1/projects/" + c.ProjectID + "/locations/" + location + "/templates/" + c.TemplateID + method
	g.checker = m
	g.services = append(g.services, svc)
	return nil
}

func (m *modelArmor) check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(m.path)
	defer c.release()
	b := c.body[:0]
	if m.prompt {
		b = append(b, `{"user_prompt_data":{"text":`...)
	} else {
		b = append(b, `{"model_response_data":{"text":`...)
	}
	b = appendJoined(b, msgs, "\n")
	c.body = append(b, "}}"...)
	m.svc.prepare(c)
	answer, err := m.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	matched, err := decodeSanitize(answer)
	if err != nil {
		return Verdict{}, err
	}
	if len(matched) == 0 {
		return Verdict{Action: Pass}, nil
	}
	return Verdict{Action: Reject, Reason: reason("matched", matched)}, nil
}

// appendJoined appends the messages' contents joined by sep as one JSON
// string.
func appendJoined(dst []byte, msgs []Message, sep string) []byte {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Content) + len(sep)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := range msgs {
		if i > 0 {
			sb.WriteString(sep)
		}
		sb.WriteString(msgs[i].Content)
	}
	return llm.AppendString(dst, sb.String())
}

// armorFilters are the filter results of a Model Armor FilterResult, by
// their JSON names, with the name the reason gives. csamFilterFilterResult
// is the API's name for the CSAM filter; agentgateway reads
// csamFilterResult, which the API does not send: both are read here.
var armorFilters = []struct{ field, name string }{
	{"raiFilterResult", "rai"},
	{"piAndJailbreakFilterResult", "pi_and_jailbreak"},
	{"maliciousUriFilterResult", "malicious_uris"},
	{"csamFilterFilterResult", "csam"},
	{"csamFilterResult", "csam"},
	{"virusScanFilterResult", "virus_scan"},
}

// decodeSanitize reads a sanitize answer and returns the filters that
// found a match (sorted, once each). The answer must hold a
// sanitizationResult (agentgateway takes any JSON, so an error answer
// passes there). filterResults may be a map or a list; an overall
// filterMatchState of MATCH_FOUND counts as a match too ("filter").
func decodeSanitize(body []byte) ([]string, error) {
	var answer struct {
		Result *struct {
			MatchState    string          `json:"filterMatchState"`
			FilterResults json.RawMessage `json:"filterResults"`
		} `json:"sanitizationResult"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, errors.New("invalid answer: " + err.Error())
	}
	if answer.Result == nil {
		return nil, errors.New("invalid answer: no sanitizationResult")
	}
	var entries []map[string]json.RawMessage
	switch first(answer.Result.FilterResults) {
	case '{':
		var byName map[string]map[string]json.RawMessage
		if err := json.Unmarshal(answer.Result.FilterResults, &byName); err != nil {
			return nil, errors.New("invalid answer: " + err.Error())
		}
		for _, e := range byName {
			entries = append(entries, e)
		}
	case '[':
		if err := json.Unmarshal(answer.Result.FilterResults, &entries); err != nil {
			return nil, errors.New("invalid answer: " + err.Error())
		}
	case 0, 'n':
	default:
		return nil, errors.New("invalid answer: filterResults is neither a map nor a list")
	}
	var matched []string
	add := func(name string) {
		if !slices.Contains(matched, name) {
			matched = append(matched, name)
		}
	}
	for _, e := range entries {
		for _, f := range armorFilters {
			if matchFound(e[f.field]) {
				add(f.name)
			}
		}
		if sdp, ok := e["sdpFilterResult"]; ok {
			var r struct {
				Inspect    json.RawMessage `json:"inspectResult"`
				Deidentify json.RawMessage `json:"deidentifyResult"`
			}
			if first(sdp) == '{' && json.Unmarshal(sdp, &r) == nil && (matchFound(r.Inspect) || matchFound(r.Deidentify)) {
				add("sdp")
			}
		}
	}
	if answer.Result.MatchState == "MATCH_FOUND" && len(matched) == 0 {
		add("filter")
	}
	slices.Sort(matched)
	return matched, nil
}

// matchFound reports a filter result whose matchState is MATCH_FOUND.
func matchFound(raw json.RawMessage) bool {
	if first(raw) != '{' || !bytes.Contains(raw, []byte("MATCH_FOUND")) {
		return false
	}
	var r struct {
		MatchState string `json:"matchState"`
	}
	return json.Unmarshal(raw, &r) == nil && r.MatchState == "MATCH_FOUND"
}

var _ checker = (*modelArmor)(nil)
