// ---- start: sign-in form, routing, first view ------------------------------------------

$("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  $("login-error").textContent = "Checking…";
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    // Any read the dashboard needs proves the token; /agents needs the same grant as every view.
    await api("/agents");
  } catch (err) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("login-error").textContent =
      err instanceof AuthError ? err.message : err.status === 403 ? `That token may not read this node's state: ${err.message}.` : `Could not check the token: ${err.message}.`;
    $("token").focus();
    return;
  }
  $("token").value = "";
  signedIn();
  $("main").focus();
});

$("signout").addEventListener("click", () => signOut("Token forgotten in this tab."));
window.addEventListener("hashchange", show);

void describeNode();
if (sessionStorage.getItem(TOKEN_KEY)) signedIn();
else signOut("");
