// Moves on to the link of a sign-in step page (next.html). A navigation this page starts
// is not held by its form-action policy (the issuer is another origin), and, coming back
// from the issuer, is the console's own: the browser sends the new SameSite=Strict cookie,
// which it would withhold on a redirect or meta refresh at the end of the issuer's
// cross-site redirect chain.
"use strict";
location.replace(document.getElementById("next").href);
