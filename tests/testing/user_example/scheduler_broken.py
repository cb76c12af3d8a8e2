"""The toy solver and policy of scheduler_good.py, each with a deliberate bug."""


def one_at_a_time(instance):
    """Each request alone, in release order: feasible, as each fits the memory alone."""
    order = sorted(range(instance.n), key=lambda i: instance.requests[i].arrival)
    starts, free_at = [0] * instance.n, 0
    for i in order:
        starts[i] = max(free_at, instance.requests[i].arrival)
        free_at = starts[i] + instance.requests[i].output - 1  # bug: overlaps the next one
    return starts


class DeadlinePolicy:
    """Prefill the first candidate, halving its chunk until the batch, decodes included,
    is predicted to end before the decodes' next-token deadline."""

    name, chunked, stats = "halving", True, {}

    def __init__(self, context):
        self.model, self.tpot_s = context.model, context.tpot_s

    def predicted_s(self, view, chunk, request):
        return self.model.iteration_time(0, 0, [(chunk, request.done)])  # bug: forgets the decodes

    def plan(self, view):
        for request in view.prefill_candidates():
            free = view.free_blocks
            if not request.admitted and not (view.free_seats and view.admissible(request, free)):
                return []
            budget = view.config.max_num_batched_tokens - view.n_decode
            chunk = min(view.max_chunk(request, free), budget)
            deadline = view.last_token_s + self.tpot_s - view.now_s
            while chunk and view.n_decode and self.predicted_s(view, chunk, request) > deadline:
                chunk //= 2
            return [(request, chunk)] if chunk else []
        return []
