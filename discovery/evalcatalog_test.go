package discovery

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"
	"testing"
)

// The evaluation catalog: the live tool lists of the npm servers the tests
// install (testdata/npm-tools.json, written by testdata/capture.sh) and the
// tools of the generator below (testdata/generated-tools.json, rewritten with
// -update). The generator crosses hand-written domains (a server each, with
// its purpose phrase and three kinds of thing it manages) with hand-written
// operations, so that every tool has a purpose of its own: one server, one
// kind of thing, one operation. Nothing in it is copied from another project.

var update = flag.Bool("update", false, "rewrite testdata/generated-tools.json from the generator")

// evalTool is one tool of the evaluation catalog, as stored in testdata.
type evalTool struct {
	Server      string         `json:"server"`
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"inputSchema,omitempty"`
}

// entity is a kind of thing a domain manages.
type entity struct {
	one, many string // "contact", "contacts"; names use them with '_' for ' '
	gloss     string // what one of them is, for a reader who does not know
}

// domain is one generated server.
type domain struct {
	server   string
	where    string // the server's purpose, as "in <where>"
	entities [3]entity
}

var domains = []domain{
	{"crm", "the sales CRM", [3]entity{
		{"contact", "contacts", "a person or company the sales team sells to, with phone and address"},
		{"deal", "deals", "a sales opportunity moving through the pipeline toward a signed contract"},
		{"lead", "leads", "a prospective customer who showed interest but is not yet qualified"}}},
	{"hr", "the human resources system", [3]entity{
		{"employee", "employees", "a person on the payroll, with their staff record, manager and salary"},
		{"leave request", "leave requests", "a request for vacation, parental or sick days away from work"},
		{"performance review", "performance reviews", "a periodic appraisal of how well a staff member did their job"}}},
	{"billing", "the billing and invoicing service", [3]entity{
		{"invoice", "invoices", "a bill sent to a client listing what they owe and when it is due"},
		{"payment", "payments", "money received from a client and matched against an invoice"},
		{"credit note", "credit notes", "a document that reduces what a client owes, issued for returns or mistakes"}}},
	{"github", "the code hosting service", [3]entity{
		{"repository", "repositories", "a git project holding source code and its commit history"},
		{"pull request", "pull requests", "a proposed code change waiting for review before it is merged"},
		{"issue", "issues", "a bug report or feature request filed in a project's tracker"}}},
	{"ci", "the continuous integration system", [3]entity{
		{"pipeline", "pipelines", "an automated workflow that compiles and tests code on every push"},
		{"build", "builds", "one run of a pipeline for a particular commit, passed or failed"},
		{"artifact", "artifacts", "a file a build produced, such as a binary, package or coverage report"}}},
	{"k8s", "the Kubernetes cluster", [3]entity{
		{"pod", "pods", "a running group of containers scheduled on a node"},
		{"deployment", "deployments", "a rollout spec that keeps a number of replicas of an application running"},
		{"secret", "secrets", "an encrypted credential, such as a password or token, mounted into containers"}}},
	{"dns", "the domain name provider", [3]entity{
		{"zone", "zones", "a domain such as example.com and the settings of its nameservers"},
		{"record", "records", "an A, CNAME, MX or TXT entry that points a hostname somewhere"},
		{"certificate", "certificates", "a TLS certificate that lets a website serve HTTPS"}}},
	{"storage", "the cloud object storage", [3]entity{
		{"bucket", "buckets", "a top-level container for stored files, with its own region and access rules"},
		{"blob", "blobs", "a stored file kept under a key inside a bucket"},
		{"lifecycle rule", "lifecycle rules", "a policy that expires old files or moves them to cheaper cold tiers"}}},
	{"db", "the managed SQL database service", [3]entity{
		{"table", "tables", "a set of rows with named, typed columns"},
		{"index", "indexes", "a lookup structure on columns that makes queries faster"},
		{"backup", "backups", "a point-in-time snapshot copy of the database that can be restored"}}},
	{"calendar", "the team calendar", [3]entity{
		{"event", "events", "a meeting or appointment at a date and time, with attendees"},
		{"room", "rooms", "a bookable meeting space with a capacity and equipment"},
		{"reminder", "reminders", "an alert that fires at a set time before something is due"}}},
	{"mail", "the email mailbox", [3]entity{
		{"message", "messages", "an email received or sent, with sender, subject and body"},
		{"draft", "drafts", "an unsent email still being written"},
		{"filter", "filters", "a rule that sorts incoming email into folders automatically"}}},
	{"chat", "the team chat workspace", [3]entity{
		{"channel", "channels", "a conversation room for one topic or team"},
		{"post", "posts", "a message someone wrote in a channel or thread"},
		{"status", "statuses", "what a member shows others: available, away, in a meeting, with an emoji"}}},
	{"docs", "the document editor", [3]entity{
		{"document", "documents", "a rich-text file such as a report, memo or proposal"},
		{"folder", "folders", "a directory that groups documents"},
		{"template", "templates", "a starting layout new documents are created from"}}},
	{"helpdesk", "the customer support help desk", [3]entity{
		{"ticket", "tickets", "a customer's support case, with its conversation and priority"},
		{"macro", "macros", "a canned reply that agents reuse to answer common questions"},
		{"sla policy", "sla policies", "response and resolution time targets that support must meet"}}},
	{"inventory", "the warehouse inventory system", [3]entity{
		{"product", "products", "an item the company stocks and sells, with its SKU and price"},
		{"stock level", "stock levels", "the quantity of an item on hand at one warehouse"},
		{"purchase order", "purchase orders", "an order placed with a supplier to restock goods"}}},
	{"shipping", "the parcel shipping service", [3]entity{
		{"shipment", "shipments", "a parcel on its way to a recipient, with its tracking number"},
		{"label", "labels", "a printable postage sticker with the address and a barcode"},
		{"pickup", "pickups", "a courier collection booked at an address and time window"}}},
	{"analytics", "the web analytics platform", [3]entity{
		{"dashboard", "dashboards", "a page of charts summarising website traffic"},
		{"report", "reports", "a scheduled summary of visitor numbers and conversions sent by email"},
		{"funnel", "funnels", "the series of steps visitors take toward a goal such as a signup"}}},
	{"monitoring", "the infrastructure monitoring service", [3]entity{
		{"alert", "alerts", "a rule that pages someone when a metric crosses a threshold"},
		{"incident", "incidents", "an outage or degradation being handled by responders"},
		{"on-call schedule", "on-call schedules", "the rotation of engineers who answer pages outside office hours"}}},
	{"logs", "the log management service", [3]entity{
		{"saved search", "saved searches", "a stored log query that can be rerun later"},
		{"log stream", "log streams", "a source of log lines from one application or host"},
		{"retention policy", "retention policies", "how many days log lines are kept before they are discarded"}}},
	{"payments", "the card payment processor", [3]entity{
		{"charge", "charges", "an attempt to take money from a credit or debit card"},
		{"customer", "customers", "a payer stored with the processor, with saved cards"},
		{"subscription", "subscriptions", "a recurring plan billed to a card every month or year"}}},
	{"ledger", "the general ledger", [3]entity{
		{"journal entry", "journal entries", "a double-entry bookkeeping record of debits and credits"},
		{"account", "accounts", "a line in the chart of accounts, such as cash or revenue"},
		{"expense claim", "expense claims", "money an employee spent on work that must be reimbursed"}}},
	{"travel", "the corporate travel booking tool", [3]entity{
		{"flight", "flights", "an airline seat reservation between two airports"},
		{"hotel booking", "hotel bookings", "a reserved room at a hotel for given nights"},
		{"itinerary", "itineraries", "a whole trip plan: transport, stays and agenda"}}},
	{"maps", "the maps and geolocation service", [3]entity{
		{"place", "places", "a point of interest such as a shop, restaurant or landmark"},
		{"route", "routes", "driving, cycling or walking directions between two locations"},
		{"geofence", "geofences", "a virtual boundary drawn around an area that triggers when crossed"}}},
	{"iam", "the identity and access management service", [3]entity{
		{"user", "users", "a login identity with a password and two-factor settings"},
		{"role", "roles", "a named set of permissions granted to people or services"},
		{"api key", "api keys", "a token a program uses to authenticate without a password"}}},
	{"wiki", "the internal knowledge base", [3]entity{
		{"page", "pages", "an article in the knowledge base"},
		{"space", "spaces", "a section of the knowledge base owned by one team"},
		{"attachment", "attachments", "a file uploaded to an article"}}},
	{"projects", "the project planning board", [3]entity{
		{"task", "tasks", "a to-do item with an assignee and a due date"},
		{"milestone", "milestones", "a target date that groups the work due by then"},
		{"sprint", "sprints", "a fixed two-week iteration of planned work"}}},
	{"marketing", "the email marketing platform", [3]entity{
		{"campaign", "campaigns", "a bulk newsletter send to an audience"},
		{"audience", "audiences", "a mailing list of subscribers who opted in"},
		{"landing page", "landing pages", "a web page built to collect signups for an offer"}}},
	{"social", "the social media scheduler", [3]entity{
		{"scheduled post", "scheduled posts", "a message queued to be published on social networks later"},
		{"profile", "profiles", "a connected social network account such as a company page"},
		{"hashtag set", "hashtag sets", "a saved group of hashtags added to posts"}}},
	{"shop", "the online storefront", [3]entity{
		{"order", "orders", "a shopper's purchase, with items, totals and delivery address"},
		{"cart", "carts", "a shopper's basket of items not yet paid for"},
		{"coupon", "coupons", "a discount code that lowers the price at checkout"}}},
	{"video", "the video conferencing service", [3]entity{
		{"meeting", "meetings", "a video call with a join link"},
		{"recording", "recordings", "a saved video of a past call"},
		{"webinar", "webinars", "a large broadcast presentation with registered attendees"}}},
	{"security", "the vulnerability scanner", [3]entity{
		{"scan", "scans", "a security check run against hosts or container images"},
		{"finding", "findings", "a weakness a scan detected, with its severity"},
		{"risk exception", "risk exceptions", "an accepted risk that stops a finding from being reported"}}},
	{"drive", "the shared file drive", [3]entity{
		{"file", "files", "an uploaded file such as a spreadsheet, image or PDF"},
		{"share link", "share links", "a URL that lets people outside the company open a file"},
		{"file version", "file versions", "an earlier saved revision of a file"}}},
	{"contracts", "the contract management tool", [3]entity{
		{"contract", "contracts", "a legal agreement with a counterparty, with its renewal date"},
		{"signature request", "signature requests", "an envelope sent to people to sign a document electronically"},
		{"clause", "clauses", "a reusable paragraph of legal wording"}}},
	{"fleet", "the vehicle fleet tracker", [3]entity{
		{"vehicle", "vehicles", "a company car, van or truck with its plate number"},
		{"trip", "trips", "a journey a vehicle made, with distance and driver"},
		{"maintenance job", "maintenance jobs", "a service or repair carried out on a vehicle"}}},
}

// operation is something done to an entity. Its name uses the plural
// when plural is set. Phrases take %[1]s = "a contact", %[2]s = "contacts",
// %[3]s = the domain's where.
type operation struct {
	verb    string
	plural  bool
	phrases []string
	args    []string // input properties besides the id
}

var (
	// common operations apply to every entity.
	common = []operation{
		{"list", true, []string{
			"Lists the %[2]s in %[3]s, newest first, one page at a time.",
			"Returns a page of %[2]s from %[3]s, with paging cursors."}, []string{"cursor", "limit"}},
		{"get", false, []string{
			"Fetches %[1]s from %[3]s by its ID, with all of its fields.",
			"Returns the full details of %[1]s in %[3]s, looked up by ID."}, nil},
		{"create", false, []string{
			"Creates %[1]s in %[3]s and returns its new ID.",
			"Adds %[1]s to %[3]s."}, []string{"fields"}},
		{"update", false, []string{
			"Changes fields of %[1]s in %[3]s; fields left out keep their values.",
			"Edits %[1]s that already exists in %[3]s."}, []string{"fields"}},
		{"delete", false, []string{
			"Permanently deletes %[1]s from %[3]s. This cannot be undone.",
			"Removes %[1]s from %[3]s for good."}, nil},
		{"search", true, []string{
			"Finds %[2]s in %[3]s whose text matches a free-text query.",
			"Full-text search over the %[2]s of %[3]s."}, []string{"query"}},
	}
	// extras: each entity gets four of them, chosen by a hash of its name.
	extras = []operation{
		{"archive", false, []string{"Archives %[1]s in %[3]s: hidden from the default lists but kept."}, nil},
		{"restore", false, []string{"Brings back %[1]s that was archived or deleted in %[3]s."}, nil},
		{"export", true, []string{"Exports %[2]s from %[3]s as a CSV or JSON file for download."}, []string{"format"}},
		{"import", true, []string{"Loads %[2]s into %[3]s in bulk from an uploaded CSV file."}, []string{"file"}},
		{"duplicate", false, []string{"Makes a copy of %[1]s in %[3]s under a new name."}, []string{"newName"}},
		{"assign", false, []string{"Hands %[1]s in %[3]s to a person, who becomes its owner."}, []string{"assignee"}},
		{"comment_on", false, []string{"Adds a note or comment to %[1]s in %[3]s for colleagues to read."}, []string{"text"}},
		{"tag", false, []string{"Adds or removes labels on %[1]s in %[3]s."}, []string{"labels"}},
		{"count", true, []string{"Counts the %[2]s in %[3]s that match a filter, without returning them."}, []string{"filter"}},
		{"get_history_of", false, []string{"Shows the change history of %[1]s in %[3]s: who changed what, and when."}, nil},
		{"share", false, []string{"Gives other people access to %[1]s in %[3]s, as viewers or editors."}, []string{"people", "access"}},
		{"watch", false, []string{"Subscribes the caller to notifications whenever %[1]s in %[3]s changes."}, nil},
	}
)

// article returns s with "a" or "an" before it.
func article(s string) string {
	if strings.IndexByte("aeiou", s[0]) >= 0 {
		return "an " + s
	}
	return "a " + s
}

func hashOf(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// generate returns the generated part of the evaluation catalog.
func generate() []evalTool {
	var out []evalTool
	for _, d := range domains {
		for _, e := range d.entities {
			ops := slices.Clone(common)
			h := hashOf(d.server + "/" + e.one)
			for len(ops) < len(common)+4 {
				op := extras[h%uint32(len(extras))]
				h = h*2654435761 + 1
				if !slices.ContainsFunc(ops, func(o operation) bool { return o.verb == op.verb }) {
					ops = append(ops, op)
				}
			}
			for _, op := range ops {
				out = append(out, makeTool(d, e, op))
			}
		}
	}
	return out
}

func makeTool(d domain, e entity, op operation) evalTool {
	noun := e.one
	if op.plural {
		noun = e.many
	}
	snake := func(s string) string { return strings.NewReplacer(" ", "_", "-", "_").Replace(s) }
	name := op.verb + "_" + snake(noun)
	title := strings.ToUpper(name[:1]) + strings.ReplaceAll(name[1:], "_", " ")
	phrase := op.phrases[hashOf(name+d.server)%uint32(len(op.phrases))]
	desc := fmt.Sprintf(phrase, article(e.one), e.many, d.where)
	desc += fmt.Sprintf(" %s is %s.", strings.ToUpper(article(e.one)[:1])+article(e.one)[1:], e.gloss)
	props := map[string]any{}
	if !op.plural {
		props["id"] = map[string]any{"type": "string", "description": "The ID of the " + e.one + "."}
	}
	for _, a := range op.args {
		props[a] = map[string]any{"type": "string"}
	}
	return evalTool{Server: d.server, Name: name, Title: title, Description: desc,
		InputSchema: map[string]any{"type": "object", "properties": props}}
}

// loadCatalog returns the whole evaluation catalog: the npm servers' tools,
// then the generated ones.
func loadCatalog(t testing.TB) []evalTool {
	t.Helper()
	var all []evalTool
	for _, f := range []string{"testdata/npm-tools.json", "testdata/generated-tools.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var part []evalTool
		if err := json.Unmarshal(b, &part); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, part...)
	}
	return all
}

// TestGeneratedCatalogIsCurrent checks testdata/generated-tools.json
// against the generator (go test -run GeneratedCatalog -update rewrites it),
// and that the whole catalog has at least 1,000 tools with distinct names.
func TestGeneratedCatalogIsCurrent(t *testing.T) {
	b, err := json.MarshalIndent(generate(), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile("testdata/generated-tools.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("testdata/generated-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Fatal("testdata/generated-tools.json is not the generator's output; run go test ./discovery -run GeneratedCatalog -update")
	}
	cat := loadCatalog(t)
	if len(cat) < 1000 {
		t.Fatalf("catalog has %d tools, want at least 1000", len(cat))
	}
	seen := map[string]bool{}
	for _, tool := range cat {
		key := tool.Server + "__" + tool.Name
		if seen[key] {
			t.Errorf("tool %s twice", key)
		}
		seen[key] = true
	}
}
