"""Our own English text for build-time checks, test fixtures and benchmarks.

No downloaded data: ``SAMPLE_SENTENCES`` are hand-written, and ``generate_texts`` composes
varied sentences (statements, questions, support requests, instructions) over many topics
from small word lists, deterministically for a seed. Pure Python, no dependencies.
"""

from __future__ import annotations

import random

# Our own sentences, varied in topic and length: the parity and quantization checks.
SAMPLE_SENTENCES: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "How do I reset my password if I no longer have access to my email?",
    "Quarterly revenue grew by twelve percent, driven mostly by subscriptions.",
    "The mitochondria is the part of the cell that produces most of its energy.",
    "Please restart the ingestion worker after changing the chunk size.",
    "A light rain fell over the harbour while the fishing boats came back in.",
    "Vector databases index embeddings so that nearest neighbours can be found quickly.",
    "She plays the cello in a string quartet on Thursday evenings.",
    "Error 503: the upstream service is temporarily unavailable.",
    "Bake the bread at two hundred degrees for about forty minutes.",
    "The treaty was signed in 1648, ending decades of war in central Europe.",
    "Can I return a pair of shoes that I have already worn outside?",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar and oxygen.",
    "Our team decided to migrate the billing system to a managed Postgres instance.",
    "The referee blew the whistle and the stadium erupted in cheers.",
    "Hi!",
    "Gradient descent updates the weights in the direction that lowers the loss.",
    "My flight was delayed by three hours because of fog at the airport.",
    "The library extends its opening hours during the exam period.",
    "Add a pinch of salt and stir until the sauce thickens.",
    "Interest rates were left unchanged at the central bank's latest meeting.",
    "The hikers reached the summit just before the storm rolled in.",
    "Use a connection pool so that each request does not open a new socket.",
    "Children learn languages faster when they hear them spoken at home.",
    "The museum's new exhibition focuses on early photography and the daguerreotype.",
    "What is the difference between a virus and a bacterium?",
    "The contract renews automatically unless either party gives thirty days' notice.",
    "Low tide uncovered a field of rock pools full of crabs and anemones.",
    "Kubernetes restarts a container when its liveness probe keeps failing.",
    "He apologised for the misunderstanding and offered to pay for the damage.",
    "The orchestra tuned their instruments as the audience took their seats.",
    "Solar panels produce less electricity in winter because the days are shorter.",
    "Refunds are issued to the original payment method within five business days.",
    "The old lighthouse keeper kept a diary of every ship that passed the point.",
    "Caching the tokenizer output avoids repeating work for identical queries.",
    "Volcanic ash can ground flights across an entire continent for days.",
    "A good night's sleep improves memory, mood and concentration.",
    "The detective noticed that the clock on the mantelpiece had stopped at midnight.",
    "Retrieval-augmented generation grounds a language model's answer in documents "
    "fetched at query time, so the answer can cite its sources and stay current.",
    "Once upon a time, in a village at the edge of a great forest, there lived a "
    "woodcutter and his two children, who often wandered among the tall pines "
    "collecting mushrooms, berries and stories to tell when the winter nights grew long.",
)

_TOPICS: dict[str, dict[str, tuple[str, ...]]] = {
    "software": {
        "subjects": (
            "the deployment pipeline",
            "our search service",
            "the ingestion worker",
            "a background job",
            "the billing API",
            "the mobile app",
            "the database replica",
            "the load balancer",
            "a new release",
            "the test suite",
            "the cache layer",
        ),
        "verbs": (
            "times out",
            "retries the request",
            "drops connections",
            "runs out of memory",
            "returns stale results",
            "rebuilds the index",
            "logs every failed call",
            "scales to three replicas",
            "rejects malformed input",
            "slows down at peak hours",
        ),
        "objects": (
            "the configuration file",
            "a rate limit",
            "the connection pool",
            "an access token",
            "the health check",
            "a feature flag",
            "the message queue",
            "a schema migration",
        ),
    },
    "cooking": {
        "subjects": (
            "the bread dough",
            "a pot of soup",
            "the tomato sauce",
            "my grandmother",
            "the pastry chef",
            "a cast iron pan",
            "the lemon tart",
            "fresh basil",
        ),
        "verbs": (
            "needs another ten minutes",
            "tastes better the next day",
            "burns on high heat",
            "rises overnight in the fridge",
            "thickens as it cools",
            "goes well with rice",
        ),
        "objects": (
            "a pinch of salt",
            "the oven",
            "two cloves of garlic",
            "a wooden spoon",
            "the spice drawer",
            "a cup of flour",
            "the baking tray",
        ),
    },
    "travel": {
        "subjects": (
            "the night train",
            "our flight to Lisbon",
            "the mountain hut",
            "a ferry",
            "the old town",
            "the hotel receptionist",
            "the coastal road",
            "a local guide",
        ),
        "verbs": (
            "was delayed by fog",
            "fills up quickly in summer",
            "offers a view of the lake",
            "stops at every village",
            "closes during the winter",
            "accepts only cash",
        ),
        "objects": (
            "a window seat",
            "the return ticket",
            "a hiking map",
            "the luggage",
            "a day pass",
            "the harbour",
            "a room with a balcony",
        ),
    },
    "finance": {
        "subjects": (
            "the quarterly report",
            "our pension fund",
            "the central bank",
            "a small business",
            "the invoice",
            "the savings account",
            "the annual budget",
            "the auditor",
        ),
        "verbs": (
            "shows a modest profit",
            "raised interest rates",
            "was paid twice by mistake",
            "covers three years of expenses",
            "needs a signature",
            "grew by six percent",
        ),
        "objects": (
            "a refund",
            "the tax return",
            "the exchange rate",
            "a late fee",
            "the receipt",
            "the credit limit",
            "a direct debit",
        ),
    },
    "nature": {
        "subjects": (
            "the river",
            "a flock of geese",
            "the oak forest",
            "the glacier",
            "a thunderstorm",
            "the coral reef",
            "a family of otters",
            "the meadow",
        ),
        "verbs": (
            "floods every spring",
            "migrates south in autumn",
            "is shrinking each year",
            "rolled in from the west",
            "recovers slowly after a fire",
            "hides among the reeds",
        ),
        "objects": (
            "the valley",
            "the shoreline",
            "a nesting site",
            "the rainfall",
            "the tide",
            "a fallen tree",
            "the northern slope",
        ),
    },
    "health": {
        "subjects": (
            "a short walk",
            "the night shift",
            "regular sleep",
            "the vaccine",
            "my physiotherapist",
            "a balanced diet",
            "the clinic",
            "seasonal allergies",
        ),
        "verbs": (
            "lowers blood pressure",
            "makes it hard to concentrate",
            "is offered for free",
            "recommends gentle stretching",
            "opens early on Mondays",
            "peak in late spring",
        ),
        "objects": (
            "a prescription",
            "the appointment",
            "a glass of water",
            "the waiting room",
            "the test results",
            "a knee brace",
        ),
    },
    "history": {
        "subjects": (
            "the treaty",
            "the medieval castle",
            "the printing press",
            "the steam engine",
            "an ancient library",
            "the old trade route",
            "the first railway",
            "the city walls",
        ),
        "verbs": (
            "changed how people shared ideas",
            "was rebuilt after the fire",
            "connected the coast with the capital",
            "ended decades of war",
            "survived three sieges",
            "was forgotten for centuries",
        ),
        "objects": (
            "the archive",
            "a handwritten letter",
            "the museum",
            "the royal court",
            "a stone bridge",
            "the harbour tax",
        ),
    },
    "sport": {
        "subjects": (
            "the home team",
            "the goalkeeper",
            "a marathon runner",
            "the referee",
            "our cycling club",
            "the tennis final",
            "the coach",
            "the swimming pool",
        ),
        "verbs": (
            "won in extra time",
            "trains before sunrise",
            "was postponed because of rain",
            "changed the lineup",
            "broke the national record",
            "opens to members only",
        ),
        "objects": (
            "the league table",
            "a new pair of shoes",
            "the training plan",
            "the trophy",
            "the season ticket",
            "the warm-up",
        ),
    },
}

_OPENERS = (
    "Yesterday",
    "Every morning",
    "According to the manual",
    "In my experience",
    "Since last week",
    "Without warning",
    "As expected",
    "After the update",
    "During the holidays",
    "Most of the time",
    "Once again",
    "Surprisingly",
)
_CONNECTORS = ("because", "although", "while", "so", "and", "but", "even though", "until")
_QUESTIONS = (
    "How do I change {o}?",
    "Why does {s} {v}?",
    "Is it normal that {s} {v}?",
    "What should I do when {s} {v}?",
    "Can someone explain why {s} {v}?",
    "Where can I find {o}?",
    "Who is responsible for {o}?",
)
_REQUESTS = (
    "Please check {o} before {s} {v}.",
    "Could you send me {o} by Friday?",
    "I would like to cancel {o}.",
    "Remember to update {o} after the meeting.",
    "Tell me when {s} {v}.",
)


def _sentence(rng: random.Random) -> str:
    topic = _TOPICS[rng.choice(sorted(_TOPICS))]
    s, v, o = (
        rng.choice(topic["subjects"]),
        rng.choice(topic["verbs"]),
        rng.choice(topic["objects"]),
    )
    kind = rng.random()
    if kind < 0.2:
        return rng.choice(_QUESTIONS).format(s=s, v=v, o=o)
    if kind < 0.35:
        return rng.choice(_REQUESTS).format(s=s, v=v, o=o)
    clause = f"{s} {v}"
    if rng.random() < 0.5:
        other = _TOPICS[rng.choice(sorted(_TOPICS))]
        clause += (
            f" {rng.choice(_CONNECTORS)} {rng.choice(other['subjects'])} "
            f"{rng.choice(other['verbs'])}"
        )
    if rng.random() < 0.4:
        clause += f", near {o}"
    if rng.random() < 0.4:
        clause = f"{rng.choice(_OPENERS)}, {clause}"
    return clause[0].upper() + clause[1:] + "."


def generate_texts(count: int, *, words: int, seed: int = 0) -> list[str]:
    """``count`` texts of about ``words`` words each (whole sentences), varied in topic."""
    if count < 0 or words < 1:
        raise ValueError("count must be >= 0 and words >= 1")
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(count):
        parts: list[str] = []
        n = 0
        while n < words:
            sentence = _sentence(rng)
            parts.append(sentence)
            n += len(sentence.split())
        texts.append(" ".join(parts))
    return texts


def generate_sentences(count: int, *, seed: int = 0) -> list[str]:
    """``count`` single sentences (one to three dozen words), varied in topic and form."""
    rng = random.Random(seed)
    return [_sentence(rng) for _ in range(count)]
