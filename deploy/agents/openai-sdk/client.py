from openai import OpenAI

# The key comes from OPENAI_API_KEY, as usual.
client = OpenAI(base_url="http://127.0.0.1:8080/v1")
