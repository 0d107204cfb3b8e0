// Ask and watch: the question goes to /explorer/ask/stream (server-sent events); each explain event draws its
// stage as it arrives and the answer streams in. Everything from the server is set as text, never as markup.

const form = document.getElementById("ask-form");
const chain = document.getElementById("live-chain");
const answer = document.getElementById("live-answer");
const status = document.getElementById("live-status");
const traceLink = document.getElementById("live-trace");
const button = form.querySelector("button");
const names = { question: "Question", grounding: "Grounding", exploration: "Exploration", focus: "Focus",
  synthesis: "Synthesis", analysis: "Step", thought: "Thought", observation: "Observation",
  conclusion: "Conclusion", error: "Error" };

function drawStage(data) {
  const item = document.createElement("li");
  item.className = data.stage === "error" ? "stage stage-error" : "stage";
  item.dataset.stage = data.stage;
  const title = document.createElement("h3");
  title.textContent = names[data.stage] || data.stage;
  const uri = document.createElement("p");
  uri.className = "uri";
  uri.textContent = data.uri;
  item.append(title, uri);
  chain.append(item);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  chain.replaceChildren();
  answer.textContent = "";
  delete answer.dataset.stagesBefore;
  traceLink.hidden = true;
  status.textContent = "Asking…";
  button.disabled = true;
  const source = new EventSource("/explorer/ask/stream?" + new URLSearchParams(new FormData(form)).toString());
  const finish = (text) => {
    source.close();
    status.textContent = text;
    button.disabled = false;
  };
  source.addEventListener("stage", (e) => drawStage(JSON.parse(e.data)));
  source.addEventListener("answer", (e) => {
    if (!("stagesBefore" in answer.dataset)) answer.dataset.stagesBefore = String(chain.children.length);
    answer.textContent += JSON.parse(e.data).text;
  });
  source.addEventListener("done", (e) => {
    const data = JSON.parse(e.data);
    if (data.href) {
      traceLink.href = data.href;
      traceLink.hidden = false;
    }
    finish(data.error ? "Failed: " + data.error : "Done.");
  });
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) finish("The connection to the gateway was lost.");
  });
});
