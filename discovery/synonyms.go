package discovery

import "strings"

// synonymGroups are words that clients use for one another when they ask
// for a tool: the verbs of operations on things, and common nouns of
// business software. A query word of a group also looks for the other
// words of its group (at relatedWeight). Phrases of two words ("time off")
// are matched on adjacent query words. The table is hand-written, of
// general vocabulary; it was written after the evaluation query set, and a
// few verbs were added after reading that set's misses (the ranker's
// commit lists them), so the held-out set (testdata/holdout.json) is the
// measure of how it does on wording it has not seen. An entry that only
// helps one query does not belong here.
var synonymGroups = [][]string{
	// operations
	{"delete", "remove", "erase", "drop", "destroy", "purge", "get rid", "cancel", "discard"},
	{"create", "make", "add", "new", "open", "start", "register", "book", "reserve", "issue", "set up",
		"write", "compose", "draft", "submit", "raise", "file", "log", "record", "put", "post", "propose", "plan", "declare", "send", "take"},
	{"update", "edit", "change", "modify", "set", "rename", "turn on", "turn off", "enable", "disable", "adjust"},
	{"get", "fetch", "show", "read", "view", "look", "retrieve", "see", "inspect", "display", "check", "details", "track", "where", "info"},
	{"list", "show", "enumerate", "browse", "all"},
	{"search", "find", "lookup", "look up", "query", "filter", "match"},
	{"export", "download", "dump", "backup", "save"},
	{"import", "upload", "load", "bulk"},
	{"archive", "hide", "shelve", "retire"},
	{"restore", "undelete", "recover", "bring back", "undo", "revert", "unarchive"},
	{"count", "how many", "number", "total", "tally"},
	{"assign", "hand", "delegate", "owner", "reassign"},
	{"share", "grant", "give access", "invite"},
	{"watch", "follow", "subscribe", "notify", "notification", "alert me"},
	{"comment", "note", "remark", "reply", "annotate"},
	{"tag", "label", "categorize", "categorise"},
	{"history", "audit", "trail", "changelog", "changes", "revision", "version"},
	{"duplicate", "copy", "clone"},
	{"send", "email", "mail", "deliver"},
	// things
	{"email", "mail", "message", "inbox", "mailbox"},
	{"bug", "issue", "defect", "problem"},
	{"bill", "invoice"},
	{"person", "people", "user", "member", "someone"},
	{"employee", "staff", "worker", "personnel"},
	{"vacation", "leave", "holiday", "time off", "absence", "pto"},
	{"password", "secret", "credential"},
	{"container", "pod", "docker"},
	{"app", "application", "service", "deployment"},
	{"package", "parcel", "shipment", "delivery"},
	{"ticket", "case", "support"},
	{"money", "payment", "charge", "pay"},
	{"card", "charge", "credit", "debit"},
	{"token", "key", "api key"},
	{"image", "picture", "photo", "logo"},
	{"file", "document", "doc", "spreadsheet", "pdf"},
	{"meeting", "event", "appointment", "call"},
	{"outage", "incident", "downtime"},
	{"directory", "folder"},
	{"sum", "add", "total", "plus", "arithmetic"},
	{"number", "numbers", "integer"},
	{"echo", "repeat"},
	{"compress", "gzip", "zip", "shrink"},
	{"llm", "model", "sampling", "completion", "generate", "ai"},
	{"form", "input", "elicitation"},
	{"fact", "observation"},
	{"link", "relation", "relationship", "connect"},
	{"environment", "env", "variable", "configuration", "config"},
	{"workspace", "root", "folders"},
	{"discount", "coupon", "promo", "voucher"},
	{"basket", "cart"},
	{"newsletter", "campaign"},
	{"subscriber", "audience", "mailing list"},
	{"tweet", "post", "social"},
	{"recording", "video", "replay"},
	{"vulnerability", "vulnerabilities", "finding", "security"},
	{"plan", "subscription", "recurring"},
	{"seat", "flight", "airline", "plane"},
	{"accommodation", "hotel", "stay", "lodging"},
	{"repair", "maintenance", "service"},
	{"truck", "van", "car", "vehicle"},
	{"database", "db", "sql"},
	{"cert", "certificate", "tls", "ssl"},
	{"domain", "hostname", "dns", "zone"},
	{"todo", "to do", "task"},
	{"iteration", "sprint"},
	{"repo", "repository", "project"},
	{"code change", "pull request", "merge request", "pr"},
	{"permission", "role", "access"},
	{"log", "logs", "logging"},
	{"chart", "dashboard", "graph"},
	{"article", "page", "wiki", "knowledge base"},
	{"schedule", "calendar", "rota", "rotation", "on call"},
	{"supplier", "vendor", "purchase order"},
	{"stock", "inventory", "quantity"},
}

// synonyms maps a stemmed word, or two stemmed words joined by a space, to
// the stems of the words related to it. Built once, at package init.
var synonyms = buildSynonyms(synonymGroups)

func buildSynonyms(groups [][]string) map[string][]string {
	m := map[string][]string{}
	for _, g := range groups {
		keys := make([]string, len(g))
		for i, w := range g {
			keys[i] = stemPhrase(w)
		}
		for i, k := range keys {
			for j, other := range keys {
				if i == j {
					continue
				}
				// A phrase stands for its stems; each is looked up.
				for _, t := range strings.Fields(other) {
					if t != k && !contains(m[k], t) {
						m[k] = append(m[k], t)
					}
				}
			}
		}
	}
	return m
}

// stemPhrase returns the stems of the words of a phrase, joined by spaces;
// stop words are kept, so that "time off" stays a phrase.
func stemPhrase(p string) string {
	var out []string
	words(p, func(w string) { out = append(out, stem(w)) })
	return strings.Join(out, " ")
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// related calls emit with the stems related to each word of a query, raw
// (lower case, stop words included), and to each pair of adjacent words,
// one group per word or pair: a document matching several stems of one
// group counts once (Index.Search takes the best of a group).
func related(raw []string, emit func(group []string)) {
	for i, w := range raw {
		s := stem(w)
		if g := synonyms[s]; len(g) > 0 {
			emit(g)
		}
		if i+1 < len(raw) {
			if g := synonyms[s+" "+stem(raw[i+1])]; len(g) > 0 {
				emit(g)
			}
		}
	}
}
