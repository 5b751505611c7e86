package guardrail

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkReason holds a reason to what logs can take: bounded, one line.
func checkReason(t *testing.T, reason string) {
	t.Helper()
	if len(reason) > maxReason || strings.ContainsAny(reason, "\r\n") {
		t.Fatalf("reason %q", reason)
	}
}

func FuzzWebhookAnswer(f *testing.F) {
	for _, s := range []string{
		`{"action":{}}`,
		`{"action":{"reason":"ok"}}`,
		`{"action":{"body":null}}`,
		`{"action":{"body":{"messages":[{"role":"user","content":"X"}]},"reason":"masked"}}`,
		`{"action":{"body":{"choices":[{"message":{"role":"assistant","content":"X"}}]}}}`,
		`{"action":{"body":"no","status_code":403,"reason":"r"}}`,
		`{"action":{"body":"no","status_code":99}}`,
		`{"action":{"body":"no"}}`,
		`{"action":{"status_code":403}}`,
		`{"action":{"body":5}}`,
		`{"action":{"reason":7}}`,
		`{"action":[]}`,
		`{"action":null}`,
		`{}`,
		`[]`,
		`{"action":{"body":{"messages":[{"role":"user"}]}}}`,
		`{"action":{"body":{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}}}`,
	} {
		f.Add([]byte(s), false, 1)
		f.Add([]byte(s), true, 1)
	}
	f.Fuzz(func(t *testing.T, body []byte, answer bool, sent int) {
		if sent < 0 || sent > 64 {
			return
		}
		ph := promptPhase
		if answer {
			ph = answerPhase
		}
		v, err := decodeWebhookAnswer(body, ph, sent)
		if err != nil {
			if v.Action != Pass || v.Messages != nil || v.Rejection != nil {
				t.Fatalf("a verdict with an error: %+v", v)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decoded invalid JSON %q", body)
		}
		checkReason(t, v.Reason)
		switch v.Action {
		case Pass:
			if v.Messages != nil || v.Rejection != nil {
				t.Fatalf("pass with more: %+v", v)
			}
		case Mask:
			if len(v.Messages) != sent || v.Rejection != nil {
				t.Fatalf("mask of %d texts for %d sent", len(v.Messages), sent)
			}
		case Reject:
			if r := v.Rejection; r == nil || r.Status < 200 || r.Status > 599 || v.Messages != nil {
				t.Fatalf("rejection %+v", v)
			}
		default:
			t.Fatalf("action %v", v.Action)
		}
	})
}

func FuzzModeration(f *testing.F) {
	for _, s := range []string{
		`{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{"violence":false}}]}`,
		`{"results":[{"flagged":true,"categories":{"violence":true,"hate":false,"sexual/minors":true}}]}`,
		`{"results":[{"flagged":true}]}`,
		`{"results":[{}]}`,
		`{"results":null}`,
		`{"results":[{"flagged":"yes"}]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		flagged, categories, err := decodeModeration(body)
		if err != nil {
			if flagged || categories != nil {
				t.Fatalf("a decision with an error")
			}
			return
		}
		if !flagged && len(categories) > 0 {
			t.Fatalf("categories %v without a flag", categories)
		}
		for _, c := range categories {
			checkReason(t, c)
		}
	})
}

func FuzzApplyGuardrail(f *testing.F) {
	for _, s := range []string{
		`{"action":"NONE","outputs":[],"assessments":[{}]}`,
		`{"action":"GUARDRAIL_INTERVENED","outputs":[{"text":"Sorry"}],"assessments":[{"contentPolicy":{"filters":[{"type":"VIOLENCE","action":"BLOCKED"}]}}]}`,
		`{"action":"GUARDRAIL_INTERVENED","outputs":[{"text":"a {EMAIL}"},{"text":"b"}],"assessments":[{"sensitiveInformationPolicy":{"piiEntities":[{"type":"EMAIL","action":"ANONYMIZED"}]}}]}`,
		`{"action":"GUARDRAIL_INTERVENED","outputs":[{}]}`,
		`{"action":"MAYBE"}`,
		`{"outputs":[]}`,
		`{"action":"GUARDRAIL_INTERVENED","assessments":[[[[{"action":"BLOCKED","type":7}]]]]}`,
	} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, body []byte, sent int) {
		if sent < 0 || sent > 64 {
			return
		}
		a, err := decodeApplyGuardrail(body)
		if err != nil {
			return
		}
		texts := make([]Message, sent)
		v := a.verdict(texts)
		checkReason(t, v.Reason)
		switch {
		case !a.intervened && v.Action != Pass:
			t.Fatalf("no intervention, verdict %v", v.Action)
		case v.Action == Mask && (len(v.Messages) != sent || a.blocked || !a.anonymized):
			t.Fatalf("mask %+v from %+v", v, a)
		case a.intervened && v.Action == Pass:
			t.Fatalf("an intervention passed")
		}
	})
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		`{"sanitizationResult":{"filterMatchState":"NO_MATCH_FOUND","filterResults":{"rai":{"raiFilterResult":{"matchState":"NO_MATCH_FOUND"}}}}}`,
		`{"sanitizationResult":{"filterMatchState":"MATCH_FOUND","filterResults":{"csam":{"csamFilterFilterResult":{"matchState":"MATCH_FOUND"}}}}}`,
		`{"sanitizationResult":{"filterResults":[{"sdpFilterResult":{"inspectResult":{"matchState":"MATCH_FOUND"}}}]}}`,
		`{"sanitizationResult":{"filterResults":7}}`,
		`{"sanitizationResult":{"filterMatchState":"MATCH_FOUND"}}`,
		`{"sanitizationResult":null}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		matched, err := decodeSanitize(body)
		if err != nil {
			if matched != nil {
				t.Fatalf("matches with an error")
			}
			return
		}
		for _, m := range matched {
			checkReason(t, m)
		}
	})
}

func FuzzContentSafety(f *testing.F) {
	for _, s := range []string{
		`{"blocklistsMatch":[],"categoriesAnalysis":[{"category":"Hate","severity":0},{"category":"Violence","severity":4}]}`,
		`{"blocklistsMatch":[{"blocklistName":"b","blocklistItemId":"1","blocklistItemText":"x"}],"categoriesAnalysis":[]}`,
		`{"blocklistsMatch":[{"blocklistName":"b"}]}`,
		`{"categoriesAnalysis":[{"category":"Hate"}]}`,
		`{"jailbreakAnalysis":{"detected":true}}`,
		`{"jailbreakAnalysis":{}}`,
		`{}`,
	} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, body []byte, threshold int) {
		reason, err := decodeAnalyzeText(body, threshold)
		if err == nil {
			checkReason(t, reason)
			if !utf8.ValidString(reason) {
				t.Fatalf("reason %q", reason)
			}
		} else if reason != "" {
			t.Fatalf("a reason with an error")
		}
		if detected, err := decodeJailbreak(body); err != nil && detected {
			t.Fatalf("detected with an error")
		}
	})
}
