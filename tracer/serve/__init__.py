"""`tracer serve`: the runs, their timelines and a job queue in a browser (Starlette + uvicorn).
Presentation and HTTP only; what the pages show comes from tracer.app."""
